"""Where independent pieces of work run: this machine's processes (default) or a Ray cluster.

An experiment's cells and a study's workers are independent of each other, so they can run
anywhere; the results never depend on where (a cell's result depends only on its key). This module
only decides *where*; what a cell is and how its result is stored (the cell protocol) stays in
:mod:`pvegym.experiments.runner`, and what a study's worker does in :mod:`pvegym.tuning.study`.

* :class:`LocalPool` — in this process (``workers=1``) or a pool of ``workers`` processes on this
  machine (forked, so workers inherit the imported and compiled model; spawned when torch is
  loaded, whose thread pools do not survive a fork).
* :class:`RayExecutor` — tasks (cells) and actors (study workers) on a Ray cluster: a local Ray
  instance started for the run (``--executor ray``) or an existing cluster (``--executor
  ray:ADDRESS``, e.g. ``ray:auto`` on a node of a cluster started with ``ray start``, or
  ``ray:ray://head:10001`` through the Ray client). Results come back to this process, which writes
  them, so worker nodes need no shared file system: only the same pvegym (a task refuses to
  evaluate a cell whose key names other model code, see the runner).

Ray is an optional dependency (the ``ray`` extra); without it ``--executor ray`` is a one-line
error naming the extra.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import Any, Protocol, TypeVar

from pvegym.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R")

RAY_EXTRA_HINT = "Ray is not installed: pip install 'pvegym[ray]' (the optional extra 'ray')"


class Executor(Protocol):
    """Runs a picklable module-level function over items, results in completion order."""

    name: str

    def __enter__(self) -> Executor: ...

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    def map_unordered(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]: ...


def ignore_interrupt() -> None:
    """In a worker process: leave Ctrl-C to the parent. The terminal sends SIGINT to the whole
    process group; the parent stops the run with one line (finished cells are kept, a rerun
    resumes), where every worker would otherwise print a traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@dataclass
class LocalPool:
    """This machine: in-process for ``workers == 1`` (or one item), else a process pool."""

    workers: int = 1
    name: str = "local"

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def map_unordered(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        todo = list(items)
        if self.workers <= 1 or len(todo) <= 1:
            for item in todo:
                yield fn(item)
            return
        methods = multiprocessing.get_all_start_methods()
        use_fork = "fork" in methods and "torch" not in sys.modules
        ctx = multiprocessing.get_context("fork" if use_fork else "spawn")
        # no `with`: its exit would shut down again without cancelling (the flag is per call)
        pool = cf.ProcessPoolExecutor(
            max_workers=self.workers, mp_context=ctx, initializer=ignore_interrupt
        )
        futures = [pool.submit(fn, item) for item in todo]
        try:
            for fut in cf.as_completed(futures):
                yield fut.result()
        except BaseException:
            # Ctrl-C (or a failed item): the items running now finish, nothing new starts
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown()


def import_ray() -> ModuleType:
    """The ``ray`` module, or a :class:`ConfigError` at ``--executor`` naming the extra."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--executor", RAY_EXTRA_HINT) from None
    return ray


class _Runner:
    """A Ray actor that runs one function call (a study's worker, for as long as it takes)."""

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)


@dataclass
class RayExecutor:
    """A Ray cluster: ``address`` None starts a local Ray instance for the run (``num_cpus``
    CPUs, default: all of this machine's); otherwise ``ray.init(address=...)`` joins an existing
    cluster. ``max_in_flight`` caps the tasks submitted at once (default: no cap, Ray schedules
    one task per free CPU)."""

    address: str | None = None
    num_cpus: int | None = None
    max_in_flight: int | None = None
    name: str = "ray"

    def __post_init__(self) -> None:
        self._module: ModuleType | None = None  # set by __enter__ (Ray is installed)
        self._started = False  # ray.init ran (on first use: a run with nothing to do skips it)

    def __enter__(self) -> RayExecutor:
        self._module = import_ray()
        return self

    @property
    def ray(self) -> ModuleType:
        """The ``ray`` module, connected (``ray.init`` on first use)."""
        if self._module is None:
            raise RuntimeError("RayExecutor used outside its `with` block")
        if not self._started:
            self._init(self._module)
            self._started = True
        return self._module

    def _init(self, ray: ModuleType) -> None:
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "logging_level": "WARNING",
            "log_to_driver": True,
        }
        if self.address is None:
            if self.num_cpus is not None:
                kwargs["num_cpus"] = self.num_cpus
        else:
            kwargs["address"] = self.address
        try:
            ray.init(**kwargs)
        except (ConnectionError, ValueError, RuntimeError) as err:
            where = f"ray:{self.address}" if self.address else "ray"
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ConfigError(
                "--executor", f"cannot start or join Ray ({where}): {first}"
            ) from None

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._module is not None and self._started:
            self._module.shutdown()  # stops a local instance; leaves an existing cluster running
        self._module, self._started = None, False

    def map_unordered(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """One Ray task per item (1 CPU each), results as they finish; on an error or an
        interruption the tasks not finished yet are cancelled."""
        ray = self.ray
        remote = ray.remote(num_cpus=1, max_retries=0)(fn)
        todo = list(items)
        cap = self.max_in_flight or len(todo)
        pending: list[Any] = []
        pos = 0
        try:
            while pos < len(todo) or pending:
                while pos < len(todo) and len(pending) < cap:
                    pending.append(remote.remote(todo[pos]))
                    pos += 1
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    yield ray.get(ref)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise

    def node_count(self) -> int:
        """Alive nodes of the cluster."""
        return sum(1 for n in self.ray.nodes() if n.get("Alive"))

    def run_actors(
        self,
        fn: Callable[..., Any],
        args: list[tuple[Any, ...]],
        poll: Callable[[], None],
        pin_to_this_node: bool = False,
        interval_s: float = 1.0,
    ) -> None:
        """``fn(*a)`` for each ``a`` in ``args``, each in its own actor (1 CPU), calling ``poll()``
        about every ``interval_s`` until all have returned; the first error is raised after the
        other actors are killed. ``pin_to_this_node`` places every actor on the driver's node (a
        resource only this machine has, such as a SQLite file)."""
        ray = self.ray
        options: dict[str, Any] = {"num_cpus": 1, "max_restarts": 0}
        if pin_to_this_node:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            node_id = ray.get_runtime_context().get_node_id()
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id, soft=False)
        actor_cls = ray.remote(_Runner).options(**options)
        actors = [actor_cls.remote() for _ in args]
        pending = [actor.call.remote(fn, *a) for actor, a in zip(actors, args, strict=True)]
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=len(pending), timeout=interval_s)
                for ref in done:
                    ray.get(ref)  # raises the worker's error here
                poll()
        finally:
            for actor in actors:
                ray.kill(actor)


def parse_executor(spec: str, workers: int | None) -> LocalPool | RayExecutor:
    """``local`` or ``ray`` or ``ray:ADDRESS`` (``--executor``), with ``--workers``: the local
    pool's size; for a local Ray instance its CPUs; for an existing cluster a cap on the cells in
    flight (default: as many as the cluster has free CPUs)."""
    if spec == "local":
        return LocalPool(workers or 1)
    if spec == "ray":
        return RayExecutor(None, num_cpus=workers)
    if spec.startswith("ray:"):
        address = spec[len("ray:") :]
        if not address:
            raise ConfigError("--executor", "ray: needs an address after the colon (or use ray)")
        return RayExecutor(address, max_in_flight=workers)
    raise ConfigError("--executor", f"unknown executor {spec!r} (allowed: local, ray, ray:ADDRESS)")
