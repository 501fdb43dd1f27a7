"""Resource agents: ``PVE::HA::Resources`` as the LRM sees it (``Resources.pm``, ``LRM.pm``).

The LRM runs a service command (start, stop, migrate, relocate) through the plugin registered for
the service's type (``vm``, ``ct``, …). The environment provides the plugins
(:meth:`pvegym.sim.ha.env.HAEnv.resource_plugin`): upstream's test hardware has ``VirtVM``,
``VirtCT`` and ``VirtFail``; pvegym's cluster model has its own.

**Asynchronous agents.** A plugin operation may return its result directly or return a generator
that *yields* while the operation runs and *returns* the result (a live migration that takes
minutes of simulated time). :func:`await_result` is the ``yield from`` that accepts both, so the
LRM's ``exec_resource_agent`` is itself a generator: run to completion in place when the LRM does
not fork (``max_workers == 0``, upstream's regression tests) or handed to the environment as a
worker (:meth:`HAEnv.fork_worker`) that the environment resumes until it returns its exit code.
What a yielded value means is private to the environment and its plugins.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

#: A resource-agent job: yields while it waits, returns its value (an exit code for a worker).
Job = Generator[Any, Any, T]


class AgentEnv(Protocol):
    """What a plugin may use of the node's environment (an :class:`~pvegym.sim.ha.env.HAEnv`)."""

    def nodename(self) -> str: ...

    def log(self, level: str, msg: str) -> None: ...

    def sleep(self, delay: float) -> None: ...


class ResourcePlugin(Protocol):
    """What the HA stack calls on a resource type (``PVE::HA::Resources`` plugin methods).

    ``id`` is the name part of the service id (``101`` of ``vm:101``). ``start``, ``shutdown``
    and ``migrate`` may be generators (see the module docstring).
    """

    def type(self) -> str: ...

    def exists(self, id: str) -> bool: ...

    def check_running(self, haenv: AgentEnv, id: str) -> bool: ...

    def start(self, haenv: AgentEnv, id: str) -> Any: ...

    def shutdown(self, haenv: AgentEnv, id: str, timeout: Any = None) -> Any: ...

    def migrate(self, haenv: AgentEnv, id: str, target: str, online: bool) -> Any:
        """Move the service to ``target`` (live if ``online``); truthy if it moved."""
        ...

    def remove_locks(
        self, haenv: AgentEnv, id: str, locks: list[str], service_node: str
    ) -> str | None:
        """Remove the first of ``locks`` the service holds; the removed lock or ``None``."""
        ...


def await_result(value: Any) -> Job[Any]:
    """``yield from`` a plugin result: a generator is run (its yields passed up), a plain value is
    returned as is."""
    if isinstance(value, Generator):
        return (yield from value)
    return value


class WouldBlockError(RuntimeError):
    """A job run in place (no worker processes) tried to wait."""


def run_in_place(job: Job[T]) -> T:
    """Run a job that must finish without waiting (the LRM without workers, ``max_workers == 0``)."""
    try:
        next(job)
    except StopIteration as stop:
        return stop.value
    job.close()
    raise WouldBlockError("resource agent waited, but the LRM runs it in place (max_workers = 0)")
