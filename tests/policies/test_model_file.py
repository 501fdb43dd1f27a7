"""Model files are read without unpickling: a crafted ``model.zip`` is refused and runs nothing,
broken files are one line and exit 2, the committed agents load and act as stable-baselines3's own
loader would, and a registered custom policy class trains, saves and loads by its name."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import pickle
import shutil
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import torch
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO
from stable_baselines3.common.policies import ActorCriticPolicy

from pvegym.errors import ConfigError
from pvegym.learning.train import train
from pvegym.learning.train_config import parse_train_config
from pvegym.policies import agent_spec
from pvegym.policies.learned import load_model, resolve_model
from pvegym.policies.model_file import pickle_globals, read_model_file

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = {"train-ppo": PPO, "train-maskable-ppo": MaskablePPO}

torch.set_num_threads(1)


class _Exec:
    """A pickle payload: unpickling it runs ``code`` (the classic ``__reduce__`` exploit)."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (exec, (self.code,))


def _copy_agent(tmp: Path, name: str = "train-ppo") -> Path:
    run = tmp / "agent"
    run.mkdir()
    shutil.copy(ROOT / "results" / name / "model.zip", run / "model.zip")
    shutil.copy(ROOT / "results" / name / "config.json", run / "config.json")
    return run


def _rewrite(zip_path: Path, edit: Any) -> None:
    """Rewrite an archive's entries through ``edit(name, bytes) -> bytes | None`` (None drops)."""
    with zipfile.ZipFile(zip_path) as zf:
        entries = [(i.filename, zf.read(i)) for i in zf.infolist()]
    with zipfile.ZipFile(zip_path, "w") as zf:
        for name, blob in entries:
            new = edit(name, blob)
            if new is not None:
                zf.writestr(name, new)


def _crafted(tmp: Path, marker: Path, key: str = "observation_space") -> Path:
    run = _copy_agent(tmp)
    payload = base64.b64encode(
        pickle.dumps(_Exec(f"open({str(marker)!r}, 'w').write('pwned')"))
    ).decode()

    def edit(name: str, blob: bytes) -> bytes:
        if name != "data":
            return blob
        data = json.loads(blob)
        data[key] = {":type:": "<class 'gymnasium.spaces.box.Box'>", ":serialized:": payload}
        return json.dumps(data).encode()

    _rewrite(run / "model.zip", edit)
    return run


def _simulate(cli: Any, model: Path | str) -> tuple[int, str, str]:
    return cli(  # type: ignore[no-any-return]
        "simulate",
        "--scenario",
        "failure-loop",
        "--policy",
        "learned",
        "--param",
        f"model={model}",
        "--duration",
        "2m",
    )


def _one_line_exit_2(result: tuple[int, str, str]) -> str:
    code, _out, err = result
    assert code == 2, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    return err


# --------------------------------------------------------------------------- no code runs
@pytest.mark.parametrize("key", ["observation_space", "policy_class", "lr_schedule", "extra_key"])
def test_crafted_pickle_is_refused_and_runs_nothing(tmp_path: Path, cli: Any, key: str) -> None:
    marker = tmp_path / "pwned"
    run = _crafted(tmp_path, marker, key)
    err = _one_line_exit_2(_simulate(cli, run))
    assert "builtins.exec" in err and "refused" in err and "nothing was executed" in err
    assert not marker.exists()
    # the file is a real exploit: stable-baselines3's own loader runs it
    with contextlib.suppress(Exception), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        PPO.load(str(run / "model.zip"), device="cpu")
    assert marker.read_text() == "pwned"


def test_a_legacy_pickled_weights_file_is_refused_and_runs_nothing(
    tmp_path: Path, cli: Any
) -> None:
    """``policy.pth`` as a plain (non-zip) pickle with a payload: not a weights-only file."""
    marker = tmp_path / "pwned"
    run = _copy_agent(tmp_path)
    payload = pickle.dumps(_Exec(f"open({str(marker)!r}, 'w').write('pwned')"))
    _rewrite(run / "model.zip", lambda n, b: payload if n == "policy.pth" else b)
    err = _one_line_exit_2(_simulate(cli, run))
    assert "policy.pth" in err
    assert not marker.exists()


def test_pickle_globals_reads_without_executing(tmp_path: Path) -> None:
    marker = tmp_path / "x"
    blob = pickle.dumps(_Exec(f"open({str(marker)!r}, 'w')"), protocol=4)
    assert ("builtins", "exec") in pickle_globals(blob)
    assert pickle_globals(pickle.dumps(np.arange(3), protocol=2))  # numpy's own globals
    assert not marker.exists()


# --------------------------------------------------------------------------- broken files
def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _not_zip(p: Path) -> None:
    p.write_text("hello\n")


def _empty(p: Path) -> None:
    p.write_bytes(b"")


def _extra_entry(p: Path) -> None:
    with zipfile.ZipFile(p, "a") as zf:
        zf.writestr("evil.py", "print('hi')")


def _no_data(p: Path) -> None:
    _rewrite(p, lambda n, b: None if n == "data" else b)


def _data_not_json(p: Path) -> None:
    _rewrite(p, lambda n, b: b"{" * 100_000 if n == "data" else b)


def _nan_weights(p: Path) -> None:
    def edit(name: str, blob: bytes) -> bytes:
        if name != "policy.pth":
            return blob
        sd = torch.load(io.BytesIO(blob), weights_only=True)
        key = next(iter(sd))
        sd[key] = torch.full_like(sd[key], float("nan"))
        buf = io.BytesIO()
        torch.save(sd, buf)
        return buf.getvalue()

    _rewrite(p, edit)


def _other_shapes(p: Path) -> None:
    def edit(name: str, blob: bytes) -> bytes:
        if name != "policy.pth":
            return blob
        sd = torch.load(io.BytesIO(blob), weights_only=True)
        key = next(k for k in sd if k.endswith("weight"))
        sd[key] = torch.zeros(3, 3)
        buf = io.BytesIO()
        torch.save(sd, buf)
        return buf.getvalue()

    _rewrite(p, edit)


def _other_class(p: Path) -> None:
    def edit(name: str, blob: bytes) -> bytes:
        if name != "data":
            return blob
        data = json.loads(blob)
        data["policy_class"][":serialized:"] = base64.b64encode(
            pickle.dumps(MaskablePPO.policy_aliases["MlpPolicy"])
        ).decode()
        return json.dumps(data).encode()

    _rewrite(p, edit)


def _zip_bomb(p: Path) -> None:
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("data", b" " * (600 * 2**20))


@pytest.mark.parametrize(
    ("breakage", "words"),
    [
        (_truncate, "zip"),
        (_not_zip, "not a valid zip"),
        (_empty, "not a valid zip"),
        (_extra_entry, "unexpected entry 'evil.py'"),
        (_no_data, "no 'data' entry"),
        (_data_not_json, "'data' is not JSON"),
        (_nan_weights, "NaN or infinity"),
        (_other_shapes, "does not fit the network"),
        (_other_class, "saved with policy class"),
        (_zip_bomb, "unpack to"),
    ],
)
def test_broken_model_files_are_one_line_exit_2(
    tmp_path: Path, cli: Any, breakage: Any, words: str
) -> None:
    run = _copy_agent(tmp_path)
    breakage(run / "model.zip")
    err = _one_line_exit_2(_simulate(cli, run))
    assert words in err
    assert len(err) < 400


def test_a_device_or_directory_is_not_a_model_file(tmp_path: Path) -> None:
    for path in ("/dev/zero", str(tmp_path)):
        with pytest.raises(ConfigError, match="not a regular file"):
            read_model_file(path)


def test_malformed_config_json_is_one_line(tmp_path: Path, cli: Any) -> None:
    run = _copy_agent(tmp_path)
    cfg = json.loads((run / "config.json").read_text())
    cfg["spaces"]["max_guests"] = 10**12
    (run / "config.json").write_text(json.dumps(cfg))
    err = _one_line_exit_2(_simulate(cli, run))
    assert "spaces.max_guests" in err
    (run / "config.json").write_text('{"algo": "PPO", "spaces": NaN}')
    assert "NaN" in _one_line_exit_2(_simulate(cli, run))


# --------------------------------------------------------------------------- committed agents
def _sb3_loadable(path: Path, agent: Any, tmp: Path) -> Path:
    """``path`` as stable-baselines3's loader takes it: the committed agents carry the policy's
    weights only (their optimizer state is dropped to keep the files small), and SB3 insists on
    an optimizer entry — a fresh one (no moments) is added to a copy; the weights stay the file's."""
    with zipfile.ZipFile(path) as zf:
        if "policy.optimizer.pth" in zf.namelist():
            return path
        entries = {i.filename: zf.read(i.filename) for i in zf.infolist()}
    buf = io.BytesIO()
    torch.save(agent.policy.optimizer.state_dict(), buf)
    entries["policy.optimizer.pth"] = buf.getvalue()
    copy = tmp / "model.zip"
    with zipfile.ZipFile(copy, "w") as zf:
        for name, blob in entries.items():
            zf.writestr(name, blob)
    return copy


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_committed_agents_load_and_act_as_sb3_loads_them(name: str, tmp_path: Path) -> None:
    """Same weights and the same action on 200 random observations (and masks) as
    stable-baselines3's own (unpickling) loader gives for our own, trusted file."""
    info = resolve_model(str(ROOT / "results" / name))
    agent = load_model(info)
    ref = COMMITTED[name].load(str(_sb3_loadable(info.path, agent, tmp_path)), device="cpu")
    ours, theirs = agent.policy.state_dict(), ref.policy.state_dict()
    assert set(ours) == set(theirs)
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
    rng = np.random.default_rng(0)
    n = int(agent.action_space.n)
    for _ in range(200):
        obs = rng.random(ref.observation_space.shape).astype(np.float32)
        kw: dict[str, Any] = {}
        if name == "train-maskable-ppo":
            mask = rng.random(n) < 0.2
            mask[0] = True
            kw["action_masks"] = mask
        assert int(agent.predict(obs, deterministic=True, **kw)[0]) == int(
            ref.predict(obs, deterministic=True, **kw)[0]
        )


# --------------------------------------------------------------------------- custom policy class
class TinyPolicy(ActorCriticPolicy):
    """A custom network, registered by name: trains, saves and loads without pickles."""

    def __init__(self, *args: Any, width: int = 8, **kwargs: Any) -> None:
        kwargs.setdefault("net_arch", [width])
        super().__init__(*args, **kwargs)


def test_a_registered_policy_class_trains_saves_and_loads_by_name(tmp_path: Path) -> None:
    agent_spec.register_policy_class("TinyPolicy", f"{__name__}:TinyPolicy")
    try:
        cfg = parse_train_config(
            {
                "name": "t-tiny",
                "algo": "PPO",
                "policy": "TinyPolicy",
                "total_timesteps": 64,
                "hyperparams": {
                    "n_steps": 32,
                    "batch_size": 16,
                    "n_epochs": 1,
                    "policy_kwargs": {"width": 5},
                },
                "eval_seeds": [1_000_000],
                "env": {"scenario": "small", "episode_seconds": "5m", "train_seeds": [0, 1]},
            }
        )
        train(cfg, tmp_path, progress=False)
        agent = load_model(resolve_model(str(tmp_path)))
        assert isinstance(agent.policy, TinyPolicy)
        assert agent.policy.mlp_extractor.policy_net[0].out_features == 5
        data = {k: v for k, v in cfg.resolved().items() if k != "spaces"}
        data["hyperparams"] = {"policy_kwargs": {"depth": 2}}
        with pytest.raises(ConfigError, match="not a parameter of TinyPolicy"):
            parse_train_config(data)
    finally:
        agent_spec._POLICY_CLASSES.pop("TinyPolicy", None)
