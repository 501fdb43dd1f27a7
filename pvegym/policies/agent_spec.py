"""What a learned agent is made of, by name: algorithm, policy (network) class, activation.

A trained agent is rebuilt from pvegym's own resolved train config (``config.json``), never from
the pickled objects stable-baselines3 writes into ``model.zip`` (:mod:`pvegym.policies.model_file` reads
only its JSON and its weights). So every class a config may name is resolved here, from a name:

* ``algo``: :data:`ALGOS` (``PPO``, ``A2C``, ``DQN``, ``MaskablePPO``).
* ``policy``: the algorithm's own aliases (``MlpPolicy``) or a custom policy class registered with
  :func:`register_policy_class` as ``"module:attr"`` — imported lazily, by that name only. A new
  network (e.g. a permutation-equivariant one) registers itself here and then trains, saves and
  loads like ``MlpPolicy``.
* ``policy_kwargs.activation_fn``: :data:`ACTIVATIONS` (TOML cannot hold a class).

The training code (``pvegym.learning``) and the ``learned`` policy both use this table.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from pvegym import limits
from pvegym.errors import ConfigError, show

#: algorithm name -> (module, class)
ALGOS: dict[str, tuple[str, str]] = {
    "PPO": ("stable_baselines3", "PPO"),
    "A2C": ("stable_baselines3", "A2C"),
    "DQN": ("stable_baselines3", "DQN"),
    "MaskablePPO": ("sb3_contrib", "MaskablePPO"),
}
#: algorithms that predict with an action mask
MASKABLE = frozenset({"MaskablePPO"})
#: on-policy algorithms of stable-baselines3 whose policy takes ``use_sde``
_SDE_POLICY = frozenset({"PPO", "A2C"})
#: ``policy_kwargs.activation_fn`` by name -> ``torch.nn`` class name
ACTIVATIONS: dict[str, str] = {
    "relu": "ReLU",
    "tanh": "Tanh",
    "elu": "ELU",
    "leaky_relu": "LeakyReLU",
    "silu": "SiLU",
}
#: constructor arguments of a policy class that are not ``policy_kwargs``
_NOT_KWARGS = frozenset({"self", "observation_space", "action_space", "lr_schedule", "use_sde"})
#: ``policy_kwargs`` a file may give the algorithms' own policy classes (the rest are classes, or
#: options for continuous actions that a discrete action space rejects)
SB3_POLICY_KWARGS = frozenset(
    {"net_arch", "activation_fn", "ortho_init", "share_features_extractor"}
)
#: custom policy classes: name -> "module:attr" (imported only when a config names it)
_POLICY_CLASSES: dict[str, str] = {}
#: where the named policy classes of the training layer live (``POLICY_CLASSES``,
#: ``policy_class(name, maskable)``): imported only when a config names one of
#: :data:`NAMED_POLICIES`, so the policies layer does not import the training code
POLICY_MODULE = "pvegym.learning.pair_policy"
NAMED_POLICIES = ("PairScorer",)
#: ``policy_kwargs`` a file may give the PairScorer policy (its layout comes from the env's padded
#: sizes): name -> (kind, bounds); units and layers bounded like ``net_arch``
PAIR_SCORER_KWARGS: dict[str, tuple[str, dict[str, float]]] = {
    "hidden": ("int", {"ge": 1, "le": limits.MAX_UNITS}),
    "noop_prob": ("float", {"gt": 0.0, "lt": 1.0}),
    "pair_layers": ("int", {"ge": 1, "le": limits.MAX_LAYERS}),
}


def register_policy_class(name: str, target: str) -> None:
    """Make policy class ``target`` (``"package.module:Class"``) available as ``policy = name`` in
    train files and loadable from a ``model.zip`` whose config names it."""
    if ":" not in target:
        raise ValueError(f"policy class target {target!r} must read 'module:attr'")
    _POLICY_CLASSES[name] = target


def registered_classes() -> set[tuple[str, str]]:
    """``(module, qualname)`` of every registered custom policy class (what a model file's pickled
    ``policy_class`` may name besides the algorithms' own classes)."""
    out = set()
    for by_kind in importlib.import_module(POLICY_MODULE).POLICY_CLASSES.values():
        out |= {(c.__module__, c.__qualname__) for c in by_kind.values()}
    for target in _POLICY_CLASSES.values():
        module, attr = target.split(":", 1)
        out.add((module, attr))
    return out


def policy_names(algo: str) -> list[str]:
    """The policy class names a train file may give for ``algo``."""
    aliases = getattr(algo_class(algo), "policy_aliases", {})
    return sorted({*aliases, *NAMED_POLICIES, *_POLICY_CLASSES})


def algo_class(name: str, path: str = "algo") -> Any:
    """The stable-baselines3 / sb3-contrib class of algorithm ``name`` (imported lazily)."""
    if name not in ALGOS:
        raise ConfigError(path, f"{show(name)} is not allowed (allowed: {', '.join(ALGOS)})")
    module, attr = ALGOS[name]
    return getattr(importlib.import_module(module), attr)


def policy_class(algo: str, name: str, path: str = "policy") -> Any:
    """The policy (network) class ``name`` for ``algo``: an alias of the algorithm or a
    registered custom class."""
    aliases = getattr(algo_class(algo), "policy_aliases", {})
    if name in aliases:
        return aliases[name]
    if name in NAMED_POLICIES:
        if algo not in ("PPO", "MaskablePPO"):
            raise ConfigError(path, f"the {name} policy is for PPO or MaskablePPO, not {algo}")
        return importlib.import_module(POLICY_MODULE).policy_class(name, algo in MASKABLE)
    if name in _POLICY_CLASSES:
        module, attr = _POLICY_CLASSES[name].split(":", 1)
        return getattr(importlib.import_module(module), attr)
    raise ConfigError(
        path,
        f"{show(name)} is not a policy class of {algo} (allowed: {', '.join(policy_names(algo))})",
    )


def activation(name: str) -> Any:
    import torch.nn as nn

    return getattr(nn, ACTIVATIONS[name])


def policy_kwargs(raw: dict[str, Any] | None) -> dict[str, Any]:
    """``policy_kwargs`` of a resolved config with names made classes (``activation_fn``)."""
    kwargs = dict(raw or {})
    if isinstance(kwargs.get("activation_fn"), str):
        kwargs["activation_fn"] = activation(kwargs["activation_fn"])
    return kwargs


def _check_layers(value: Any, path: str) -> None:
    if not isinstance(value, list | tuple):
        raise ConfigError(path, f"must be a list of layer sizes, not {show(value)}")
    if len(value) > limits.MAX_LAYERS:
        raise ConfigError(path, f"at most {limits.MAX_LAYERS} layers, not {len(value)}")
    for i, units in enumerate(value):
        limits.whole_number(units, f"{path}[{i}]", ge=1, le=limits.MAX_UNITS)


def check_policy_kwargs(algo: str, name: str, raw: Any, path: str = "policy_kwargs") -> None:
    """``policy_kwargs`` as a train file or a resolved config gives them. For the algorithms' own
    policy classes: :data:`SB3_POLICY_KWARGS`; for a registered class: its constructor's keywords.
    Values are plain (true/false, finite numbers, short strings, lists of layer sizes); ``net_arch``
    is bounded (:data:`pvegym.limits.MAX_LAYERS` × :data:`~pvegym.limits.MAX_UNITS`). Classes
    (extractors, optimizers) cannot be named in a file."""
    if raw is None:
        return
    if not isinstance(raw, dict):
        raise ConfigError(path, f"must be a table, not {show(raw)}")
    if name in NAMED_POLICIES:
        _check_pair_scorer_kwargs(raw, path)
        return
    cls = policy_class(algo, name, path)
    params = inspect.signature(cls.__init__).parameters
    if name in getattr(algo_class(algo), "policy_aliases", {}):
        allowed = sorted(SB3_POLICY_KWARGS & set(params))
    else:
        allowed = sorted(
            p for p in params if p not in _NOT_KWARGS and not p.endswith(("_class", "_kwargs"))
        )
    for key, value in raw.items():
        where = f"{path}.{show(key, 40, quote=False)}"
        if key not in allowed:
            raise ConfigError(where, f"not a parameter of {name} (allowed: {', '.join(allowed)})")
        if key == "net_arch" and isinstance(value, dict):
            for sub, layers in value.items():
                if sub not in ("pi", "vf"):
                    raise ConfigError(f"{where}.{show(sub, 20, quote=False)}", "allowed: pi, vf")
                _check_layers(layers, f"{where}.{sub}")
        elif key == "net_arch" or isinstance(value, list | tuple):
            _check_layers(value, where)
        elif key == "activation_fn":
            if value not in ACTIVATIONS:
                raise ConfigError(
                    where, f"{show(value)} is not allowed (allowed: {', '.join(ACTIVATIONS)})"
                )
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int | float):
            limits.check_number(float(value), where)
        elif not (isinstance(value, str) and len(value) <= 100):
            raise ConfigError(where, f"must be true/false, a number or a list, not {show(value)}")


def _check_pair_scorer_kwargs(raw: dict[str, Any], path: str) -> None:
    for k, v in raw.items():
        where = f"{path}.{show(k, 40, quote=False)}"
        if k not in PAIR_SCORER_KWARGS:
            allowed = ", ".join(PAIR_SCORER_KWARGS)
            raise ConfigError(where, f"not an option of PairScorer (allowed: {allowed})")
        kind, bounds = PAIR_SCORER_KWARGS[k]
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ConfigError(where, f"must be a number, not {show(v)}")
        if kind == "int":
            limits.whole_number(v, where, ge=int(bounds["ge"]), le=int(bounds["le"]))
        else:
            limits.check_number(
                float(v),
                where,
                ge=bounds.get("ge"),
                gt=bounds.get("gt"),
                le=bounds.get("le"),
                lt=bounds.get("lt"),
            )


def build_policy_network(
    algo: str,
    name: str,
    observation_space: Any,
    action_space: Any,
    hyperparams: dict[str, Any],
    layout: dict[str, Any] | None = None,
) -> Any:
    """The policy network of an agent exactly as the algorithm builds it in ``_setup_model``,
    without the algorithm (no rollout or replay buffer): what inference needs. Its weights are
    untrained; load a state dict into it. ``layout``: the observation layout a
    :data:`NAMED_POLICIES` network is built for (``Layout.as_dict()``)."""
    cls = policy_class(algo, name)
    kwargs = policy_kwargs(hyperparams.get("policy_kwargs"))
    if name in NAMED_POLICIES:
        kwargs["layout"] = layout
    if algo in _SDE_POLICY:
        kwargs["use_sde"] = bool(hyperparams.get("use_sde", False))
    lr = hyperparams.get("learning_rate", 3e-4)
    rate = float(lr) if isinstance(lr, int | float) and not isinstance(lr, bool) else 3e-4
    policy = cls(observation_space, action_space, lambda _: rate, **kwargs)
    return policy.to("cpu")


__all__ = [
    "ACTIVATIONS",
    "ALGOS",
    "MASKABLE",
    "NAMED_POLICIES",
    "PAIR_SCORER_KWARGS",
    "POLICY_MODULE",
    "activation",
    "algo_class",
    "build_policy_network",
    "check_policy_kwargs",
    "policy_class",
    "policy_kwargs",
    "policy_names",
    "register_policy_class",
]
