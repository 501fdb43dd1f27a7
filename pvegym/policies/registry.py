"""Named policies. ``make_policy("upstream", threshold=0.3)`` builds one with its constants."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

from pvegym.errors import ConfigError
from pvegym.sim.view import Balancer

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


def make_policy(name: str, path: str = "policy", **params: Any) -> Balancer:
    """Build policy ``name`` with constants ``params``; unknown constants are a ConfigError."""
    factory = _factory(name, path)
    if params:
        config_cls = getattr(factory, "Config", None)
        if config_cls is None:
            raise ConfigError(
                f"{path}.{next(iter(params))}", f"policy {name!r} takes no parameters"
            )
        known = {f.name for f in dataclasses.fields(config_cls)}
        for key in params:
            if key not in known:
                raise ConfigError(
                    f"{path}.{key}",
                    f"unknown parameter of {name!r} (allowed: {', '.join(sorted(known))})",
                )
        return factory(config_cls(**params))
    return factory()
