"""Gymnasium registration of pvegym's environments, by entry-point string.

``import pvegym`` is enough for ``gymnasium.make("pvegym/Cluster-v0")`` (and ``-v1``; and for
Gymnasium's ``gym.register_envs(pvegym)`` idiom), yet importing pvegym — or only its model, ``pvegym.sim`` —
loads no Gymnasium code: the environment is named by an entry-point string (its module is imported
by ``make``), and the registration itself runs when Gymnasium is imported, now if it already is,
else right after its import (:class:`_AfterImport`). The registry is the one place environment ids
are defined; ``pvegym.env`` registers through it too.

The benchmark's tasks (:data:`pvegym.sim.tasks.TASKS`) are registered from that table, one id each
(:func:`task_id`: ``pvegym/Small-v1``, ...), their specs carrying the task's settings: the
episode's own length as ``max_episode_steps``, the mask options, the reward (``BALANCER_COST``,
measured against the ``noop`` twin). ``gym.make("pvegym/Small-v1")`` is the benchmark's
environment; a training run may override any of it (``gym.make(id, reward_baseline="none")``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType

#: the longest episode of the scenario catalog, in decisions (one per 10 s CRM round):
#: ``idle-night``, 8 h (``tests/test_registration.py`` derives it from the catalog)
LONGEST_EPISODE_STEPS = 2880

#: id → (entry point, the spec's ``max_episode_steps``). The environment truncates every episode
#: itself at its scenario's duration (``ClusterEnv`` "Episode End"), so the spec's limit — which
#: ``gymnasium.make`` applies as a ``TimeLimit`` — is the catalog's longest episode and never cuts a
#: catalog scenario short; for a longer scenario file pass ``max_episode_steps=-1`` (the
#: environment warns when the registered limit is shorter than its episode).
ENVIRONMENTS: dict[str, tuple[str, int]] = {
    "pvegym/Cluster-v0": ("pvegym.env.cluster_env:ClusterEnv", LONGEST_EPISODE_STEPS),
    "pvegym/Cluster-v1": ("pvegym.env.cluster_env_v1:ClusterEnvV1", LONGEST_EPISODE_STEPS),
}
#: id → ``gymnasium.make_vec``'s vector entry point (``vectorization_mode="vector_entry_point"``,
#: its default when one is registered): :class:`pvegym.vector.ClusterVectorEnv`
VECTOR_ENTRY_POINTS: dict[str, str] = {
    "pvegym/Cluster-v0": "pvegym.vector.cluster_vector_env:make_cluster_v0",
    "pvegym/Cluster-v1": "pvegym.vector.cluster_vector_env:make_cluster_v1",
}
#: ids kept on purpose beside a newer version: ``Cluster-v0`` is the environment of the committed
#: flat agents (``results/train-ppo``, ``results/train-maskable-ppo``), not a superseded one.
#: Gymnasium's ``make`` calls any id with a higher version of the same name "out of date" (a
#: ``DeprecationWarning`` on every first ``make`` of a process; no ``register`` option turns the
#: check off), so :func:`register_environments` ignores exactly that message for these ids.
MAINTAINED_OLDER_VERSIONS = ("pvegym/Cluster-v0",)


#: the environment class of every benchmark task
TASK_ENTRY_POINT = "pvegym.env.cluster_env_v1:ClusterEnvV1"
TASK_VECTOR_ENTRY_POINT = "pvegym.vector.cluster_vector_env:make_cluster_v1"


def task_id(name: str, version: int) -> str:
    """The environment id of benchmark task ``name`` (``small`` → ``pvegym/Small-v1``)."""
    return f"pvegym/{name.capitalize()}-v{version}"


def task_ids() -> dict[str, str]:
    """Task name → environment id, for every task of :data:`pvegym.sim.tasks.TASKS`."""
    from pvegym.sim.tasks import TASKS

    return {name: task_id(name, t.version) for name, t in TASKS.items()}


def register_environments() -> None:
    """Register every id of :data:`ENVIRONMENTS` not registered yet (idempotent), and ignore
    Gymnasium's "out of date" warning for :data:`MAINTAINED_OLDER_VERSIONS` (that message only;
    a filter installed after Gymnasium's own, so it takes precedence over it)."""
    import gymnasium

    for env_id in MAINTAINED_OLDER_VERSIONS:
        warnings.filterwarnings(  # the message starts with Gymnasium's colour code and "WARN: "
            "ignore", f".*The environment {re.escape(env_id)} is out of date", DeprecationWarning
        )

    for env_id, (entry_point, steps) in ENVIRONMENTS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point=entry_point,
                vector_entry_point=VECTOR_ENTRY_POINTS.get(env_id),
                max_episode_steps=steps,
            )
    _register_tasks(gymnasium)


def _register_tasks(gymnasium: ModuleType) -> None:
    from pvegym.sim.cost import BALANCER_COST
    from pvegym.sim.tasks import TASKS

    for name, task in TASKS.items():
        env_id = task_id(name, task.version)
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point=TASK_ENTRY_POINT,
                vector_entry_point=TASK_VECTOR_ENTRY_POINT,
                max_episode_steps=task.episode_steps,
                kwargs={**task.env_kwargs(), "reward_weights": dict(BALANCER_COST)},
            )


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``then`` once, right after module ``name`` has been imported (by anyone)."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name, self.then = name, then

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once; and the real finders answer the lookup below
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module, then = loader.exec_module, self.then

        def exec_then(module: ModuleType) -> None:
            exec_module(module)
            then()

        loader.exec_module = exec_then  # type: ignore[method-assign]
        return spec


def register_when_gymnasium_is_imported() -> None:
    if "gymnasium" in sys.modules:
        register_environments()
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport("gymnasium", register_environments))
