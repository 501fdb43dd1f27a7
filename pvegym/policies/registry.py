"""Named policies. ``make_policy("upstream", threshold=0.3)`` builds one with its constants."""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Callable
from typing import Any

from pvegym.errors import ConfigError
from pvegym.sim.view import Balancer
from pvegym.units import parse_quantity

# name -> "module:factory"; modules are imported lazily so that a policy's heavy dependencies
# (torch for learned agents) load only when it is used.
_REGISTRY: dict[str, str] = {
    "noop": "pvegym.policies.noop:NoopPolicy",
    "upstream": "pvegym.policies.upstream:UpstreamPolicy",
    "patched": "pvegym.policies.patched:PatchedPolicy",
    "guest-centric": "pvegym.policies.guest_centric:GuestCentricPolicy",
    "planner": "pvegym.policies.planner:PlannerPolicy",
    "learned": "pvegym.policies.learned:LearnedPolicy",
}


def available() -> list[str]:
    return sorted(_REGISTRY)


def register(name: str, target: str) -> None:
    _REGISTRY[name] = target


def _factory(name: str, path: str) -> Callable[..., Balancer]:
    if name not in _REGISTRY:
        raise ConfigError(path, f"unknown policy {name!r} (allowed: {', '.join(available())})")
    module, attr = _REGISTRY[name].split(":")
    factory: Callable[..., Balancer] = getattr(importlib.import_module(module), attr)
    return factory


def artifact_fingerprint(name: str, params: dict[str, Any], path: str = "policy") -> str:
    """Hash of the files a policy loads (a trained model), or "" when it loads none; experiment
    runners put it in a result's key so that changed artifacts are never mixed with old results."""
    fingerprint = getattr(_factory(name, path), "artifact_fingerprint", None)
    return str(fingerprint(params)) if fingerprint is not None else ""


def make_policy(
    name: str, path: str = "policy", *, param_key: str | None = None, **params: Any
) -> Balancer:
    """Build policy ``name`` with constants ``params``; unknown or bad constants are a
    ConfigError at ``{path}.{constant}``, or ``{param_key} {constant}`` when the constants came
    from a flag (``param_key="--param"``). A constant whose field says its unit (``duration``,
    ``rate``: :func:`pvegym.policies.upstream.quantity`) takes a string with its unit (``"1m"``, ``"430MiB/s"``)."""
    factory = _factory(name, path)

    def key_of(key: str) -> str:
        return f"{param_key} {key}" if param_key else f"{path}.{key}"

    if not params:
        return factory()
    config_cls = getattr(factory, "Config", None)
    if config_cls is None:
        raise ConfigError(key_of(next(iter(params))), f"policy {name!r} takes no parameters")
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    values = dict(params)
    for key, value in params.items():
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                key_of(key),
                f"unknown parameter of {name!r} ({hint}allowed: {', '.join(sorted(fields))})",
            )
        unit = fields[key].metadata.get("unit")
        if unit is not None and isinstance(value, str):
            values[key] = parse_quantity(unit, value, key_of(key))
    try:
        config = config_cls(**values)
    except ConfigError as err:  # a constant's own check names it ``<policy>.<constant>``
        bad = err.path.rpartition(".")[2]
        if bad in params:
            raise ConfigError(key_of(bad), err.message) from None
        raise
    return factory(config)
