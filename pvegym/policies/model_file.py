"""Reading a stable-baselines3 ``model.zip`` without unpickling anything.

stable-baselines3's ``Algorithm.load`` unpickles (cloudpickle) every ``":serialized:"`` entry of
the archive's ``data`` — the spaces, the policy class, schedules, buffers — so a crafted
``model.zip`` runs arbitrary code when it is loaded. pvegym never calls it. :func:`read_model_file`
reads only:

* ``data``'s plain JSON values (counters such as ``num_timesteps``);
* the weights (``*.pth``) with ``torch.load(weights_only=True)``: PyTorch's restricted unpickler,
  which builds tensors and plain containers only.

Every ``":serialized:"`` entry is *inspected, never executed*: :func:`pickle_globals` walks its
opcodes (:mod:`pickletools`) and lists the globals it would import. An entry that names anything
outside :data:`ALLOWED_MODULES` (``os.system``, ``builtins.eval``, ``subprocess.Popen``, …) makes
the file refused with a one-line error: such a file was not written by stable-baselines3. The
entries that pass are still not loaded: the spaces, the policy class and the hyperparameters are
rebuilt from pvegym's own ``config.json`` (:mod:`pvegym.policies.agent_spec`), and the pickled policy class
only has to *name* the class that config names.

Limits (a file is user input): the file is a regular file of at most :data:`MAX_FILE_BYTES`, its
entries hold at most :data:`MAX_UNPACKED_BYTES` unpacked (a zip bomb is refused before it is
unpacked), ``data`` at most :data:`MAX_DATA_BYTES`. Every problem is a
:class:`~pvegym.errors.ConfigError` with one line naming the file.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import os
import pickletools
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pvegym.errors import ConfigError, show

#: a model file larger than this is refused (bytes); pvegym's agents are a few MB
MAX_FILE_BYTES = 256 * 2**20
#: the archive's entries unpacked, summed (bytes)
MAX_UNPACKED_BYTES = 512 * 2**20
#: the ``data`` entry (JSON, bytes)
MAX_DATA_BYTES = 16 * 2**20
#: modules whose globals a stable-baselines3 pickle may name (spaces, arrays, schedules, buffers,
#: policy and activation classes); anything else is refused
ALLOWED_MODULES = (
    "numpy",
    "gymnasium.spaces",
    "collections",
    "stable_baselines3",
    "sb3_contrib",
    "torch.nn",
    "torch.optim",
    "policies",
    "pvegym",
)
#: entries of an SB3 archive besides ``<name>.pth`` weight files
_PLAIN_ENTRIES = frozenset({"data", "_stable_baselines3_version", "system_info.txt"})
_PTH = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,99}\.pth$")
_STRING_OPS = frozenset(
    {
        "STRING",
        "BINSTRING",
        "SHORT_BINSTRING",
        "UNICODE",
        "BINUNICODE",
        "SHORT_BINUNICODE",
        "BINUNICODE8",
    }
)


@dataclass
class ModelFile:
    """What pvegym takes from a ``model.zip``: ``data``'s JSON values (pickled entries left
    out), the globals each pickled entry names (inspected, not loaded), the state dicts of the
    ``*.pth`` entries (``policy``, ``policy.optimizer``, …) and ``pytorch_variables``."""

    path: Path
    data: dict[str, Any] = field(default_factory=dict)
    pickled: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    variables: Any = None


def _allowed(module: str, attr: str) -> bool:
    from pvegym.policies.agent_spec import registered_classes

    if (module, attr) in registered_classes():
        return True
    return any(module == m or module.startswith(m + ".") for m in ALLOWED_MODULES)


def pickle_globals(blob: bytes) -> list[tuple[str, str]]:
    """The ``(module, name)`` globals a pickle would import, found by walking its opcodes with a
    symbolic stack (strings and the memo only) — the pickle is never executed. Raises
    ``ValueError`` when that cannot be told (malformed pickle, extension codes, persistent ids,
    a global built from something other than string constants)."""
    found: list[tuple[str, str]] = []
    stack: list[Any] = []
    marks: list[int] = []
    memo: dict[int, Any] = {}
    opaque = object()
    for op, arg, _pos in pickletools.genops(blob):
        name = op.name
        if name in _STRING_OPS:
            stack.append(arg.decode("latin-1") if isinstance(arg, bytes) else arg)
        elif name == "MARK":
            marks.append(len(stack))
        elif name in ("PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"):
            key = arg if isinstance(arg, int) else int(str(arg))
            if name.endswith("PUT"):
                memo[key] = stack[-1] if stack else opaque
            elif key not in memo:
                raise ValueError(f"memo key {key} read before it is written")
            else:
                stack.append(memo[key])
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1] if stack else opaque
        elif name in ("GLOBAL", "INST"):
            module, _, attr = str(arg).partition(" ")
            found.append((module, attr))
            if name == "INST":
                del stack[marks.pop() :]
            stack.append(opaque)
        elif name == "STACK_GLOBAL":
            if len(stack) < 2 or not all(isinstance(s, str) for s in stack[-2:]):
                raise ValueError("a global whose name is not a string constant")
            attr, module = stack.pop(), stack.pop()
            found.append((module, attr))
            stack.append(opaque)
        elif name in ("EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID"):
            raise ValueError(f"opcode {name} (extension registry / persistent id)")
        else:
            before = [s.name for s in op.stack_before]
            if "mark" in before:
                if not marks:
                    raise ValueError(f"{name} without a mark")
                del stack[marks.pop() :]
                below = before.index("mark")
            else:
                below = len(before)
            if below > len(stack):
                raise ValueError(f"stack underflow at {name}")
            if below:
                del stack[-below:]
            stack.extend(opaque for s in op.stack_after if s.name != "mark")
    return found


def _read_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    with zf.open(info) as fh:
        blob = fh.read(limit + 1)
    if len(blob) > limit or len(blob) != info.file_size:
        raise ValueError(f"entry {info.filename!r} is not the size its header says")
    return blob


def _check_torch_zip(blob: bytes, entry: str) -> None:
    """A ``.pth`` is itself a zip (PyTorch's format since 1.6): bound what it unpacks to."""
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as inner:
            total = sum(i.file_size for i in inner.infolist())
    except zipfile.BadZipFile:
        raise ValueError(f"{entry} is not a PyTorch zip file") from None
    if total > MAX_UNPACKED_BYTES:
        raise ValueError(f"{entry} unpacks to {total} bytes (at most {MAX_UNPACKED_BYTES})")


def _load_tensors(blob: bytes, entry: str) -> Any:
    import pickle

    import torch

    _check_torch_zip(blob, entry)
    try:
        return torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, ValueError, EOFError, KeyError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{entry}: not a weights-only PyTorch file ({show(first, 120)})") from None


def read_model_file(path: str | Path, where: str = "model") -> ModelFile:
    """Read ``path`` as described in the module docstring; errors are one-line ConfigErrors at
    key ``where`` naming the file."""
    p = Path(path)
    label = show(str(p), 120)
    try:
        st = os.stat(p)
    except OSError as err:
        raise ConfigError(where, f"cannot read model file {label}: {err.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(where, f"model file {label} is not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        raise ConfigError(
            where, f"model file {label} has {st.st_size} bytes (at most {MAX_FILE_BYTES})"
        )
    out = ModelFile(p)
    try:
        with zipfile.ZipFile(p) as zf:
            infos = zf.infolist()
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                raise ValueError("duplicate entries")
            for name in names:
                if name not in _PLAIN_ENTRIES and not _PTH.match(name):
                    raise ValueError(f"unexpected entry {show(name, 60)}")
            total = sum(i.file_size for i in infos)
            if total > MAX_UNPACKED_BYTES:
                raise ValueError(f"entries unpack to {total} bytes (at most {MAX_UNPACKED_BYTES})")
            if "data" not in names:
                raise ValueError("no 'data' entry (not a stable-baselines3 model)")
            for info in infos:
                if info.filename == "data":
                    _read_data(_read_entry(zf, info, MAX_DATA_BYTES), out)
                elif info.filename.endswith(".pth"):
                    tensors = _load_tensors(
                        _read_entry(zf, info, MAX_UNPACKED_BYTES), info.filename
                    )
                    key = info.filename[: -len(".pth")]
                    if key in ("pytorch_variables", "tensors"):
                        out.variables = tensors
                    else:
                        out.params[key] = tensors
    except ConfigError as err:
        raise ConfigError(where, f"model file {label}: {err.message}") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as err:
        raise ConfigError(where, f"model file {label} is not a valid zip archive ({err})") from None
    except (ValueError, EOFError, zlib.error, NotImplementedError, RuntimeError, OSError) as err:
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(where, f"model file {label}: {show(msg, 200)}") from None
    return out


def _read_data(blob: bytes, out: ModelFile) -> None:
    try:
        doc = json.loads(blob.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ValueError(f"'data' is not JSON ({show(str(err), 80)})") from None
    if not isinstance(doc, dict):
        raise ValueError("'data' is not a JSON object")
    for key, value in doc.items():
        if isinstance(value, dict) and ":serialized:" in value:
            out.pickled[key] = _inspect_pickle(key, value[":serialized:"])
        else:
            out.data[key] = value


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} in 'data'")


def _inspect_pickle(key: str, text: Any) -> list[tuple[str, str]]:
    where = f"data.{show(key, 40, quote=False)}"
    if not isinstance(text, str):
        raise ValueError(f"{where}: ':serialized:' is not a string")
    try:
        blob = base64.b64decode(text.encode("ascii"), validate=True)
        found = pickle_globals(blob)
    except (binascii.Error, UnicodeEncodeError, ValueError, IndexError, EOFError) as err:
        raise ValueError(f"{where}: not an inspectable pickle ({show(str(err), 80)})") from None
    for module, attr in found:
        if not _allowed(module, attr):
            raise ConfigError(
                "",
                f"{where} is a pickle that would call {show(f'{module}.{attr}', 80, quote=False)}"
                " — refused (pvegym never unpickles model files; nothing was executed)",
            )
    return found


def check_policy_class(mf: ModelFile, cls: type, where: str = "model") -> None:
    """The archive's (pickled, inspected) policy class must name ``cls``, the class pvegym's
    config names: a model is never rebuilt with another network than it was trained with."""
    found = mf.pickled.get("policy_class")
    if found is None:
        return
    want = (cls.__module__, cls.__qualname__)
    if found != [want]:
        got = ", ".join(f"{m}.{a}" for m, a in found) or "nothing"
        raise ConfigError(
            where,
            f"model file {show(str(mf.path), 120)} was saved with policy class "
            f"{show(got, 100, quote=False)}, its config names {want[0]}.{want[1]}",
        )


def load_state(module: Any, state: Any, entry: str, where: str = "model") -> None:
    """Load a state dict into ``module`` after checking it holds exactly the module's tensors,
    with the same shapes, and finite values: a mismatch is one line, not PyTorch's error."""
    import torch

    own = module.state_dict()
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise ConfigError(where, f"{entry} is not a state dict")
    missing = sorted(set(own) - set(state))
    extra = sorted(set(state) - set(own))
    bad_shape = [
        k
        for k in own
        if k in state
        and (not isinstance(state[k], torch.Tensor) or tuple(state[k].shape) != tuple(own[k].shape))
    ]
    if missing or extra or bad_shape:
        parts = []
        if missing:
            parts.append(f"missing {show(', '.join(missing), 80, quote=False)}")
        if extra:
            parts.append(f"unexpected {show(', '.join(extra), 80, quote=False)}")
        if bad_shape:
            parts.append(f"other shape {show(', '.join(bad_shape), 80, quote=False)}")
        raise ConfigError(
            where, f"{entry} does not fit the network its config describes ({'; '.join(parts)})"
        )
    for k, t in state.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ConfigError(where, f"{entry}: {show(k, 60, quote=False)} holds NaN or infinity")
    module.load_state_dict(state, strict=True)


def plain_int(mf: ModelFile, key: str, default: int = 0) -> int:
    """A non-negative whole number from ``data`` (e.g. ``num_timesteps``)."""
    v = mf.data.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ConfigError("model", f"data.{key} must be a whole number ≥ 0, not {show(v)}")
    return v


def plain_float(mf: ModelFile, key: str, default: float) -> float:
    v = mf.data.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ConfigError("model", f"data.{key} must be a finite number, not {show(v)}")
    return float(v)


__all__ = [
    "ALLOWED_MODULES",
    "MAX_DATA_BYTES",
    "MAX_FILE_BYTES",
    "MAX_UNPACKED_BYTES",
    "ModelFile",
    "check_policy_class",
    "load_state",
    "pickle_globals",
    "plain_float",
    "plain_int",
    "read_model_file",
]
