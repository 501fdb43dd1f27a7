"""``import pvegym`` registers the environments by entry-point string, without loading Gymnasium."""

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from pvegym.registration import ENVIRONMENTS, LONGEST_EPISODE_STEPS
from pvegym.sim import catalog

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter (default warning filters, as a newcomer's run has)."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )


def _python(code: str) -> dict[str, object]:
    return dict(json.loads(_run(code).stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    ("env_id", "cls"),
    [("pvegym/Cluster-v0", "ClusterEnv"), ("pvegym/Cluster-v1", "ClusterEnvV1")],
)
def test_import_pvegym_then_gymnasium_make_works(env_id: str, cls: str) -> None:
    got = _python(
        "import json, sys\n"
        "import pvegym\n"
        "loaded = 'gymnasium' in sys.modules\n"
        "import gymnasium as gym\n"
        "gym.register_envs(pvegym)\n"
        f"env = gym.make({env_id!r}, scenario='failure-loop')\n"
        "obs, _ = env.reset(seed=0)\n"
        "print(json.dumps({'gymnasium_loaded_by_pvegym': loaded,\n"
        "  'steps': env.spec.max_episode_steps, 'obs': len(obs),\n"
        "  'class': type(env.unwrapped).__name__}))\n"
    )
    assert got["gymnasium_loaded_by_pvegym"] is False
    assert got["steps"] == LONGEST_EPISODE_STEPS
    assert int(str(got["obs"])) > 0
    assert got["class"] == cls


def test_gymnasium_first_then_pvegym() -> None:
    got = _python(
        "import json, sys\n"
        "import gymnasium as gym\n"
        "import pvegym\n"
        "print(json.dumps({'registered': all(i in gym.registry\n"
        "  for i in ('pvegym/Cluster-v0', 'pvegym/Cluster-v1')),\n"
        "  'env_loaded': 'pvegym.env.cluster_env' in sys.modules}))\n"
    )
    # registered by entry-point string: the environment's module loads only on make
    assert got == {"registered": True, "env_loaded": False}


def test_registration_compiles_no_kernel() -> None:
    """Registering the benchmark tasks reads their table (pvegym.sim.tasks), not the numba round
    kernel: ``import gymnasium, pvegym`` stays cheap (the kernel loads on the first make)."""
    got = _python(
        "import json, sys\n"
        "import gymnasium as gym\n"
        "import pvegym\n"
        "print(json.dumps({'small': 'pvegym/Small-v1' in gym.registry,\n"
        "  'numba': 'numba' in sys.modules}))\n"
    )
    assert got == {"small": True, "numba": False}


def test_the_model_loads_no_gymnasium() -> None:
    got = _python(
        "import json, sys\n"
        "from pvegym.sim.simulation import Simulation\n"
        "from pvegym.sim import catalog\n"
        "Simulation(catalog.scenario('failure-loop'), 0).reset()\n"
        "print(json.dumps({'gymnasium': 'gymnasium' in sys.modules}))\n"
    )
    assert got == {"gymnasium": False}


def test_registered_limit_is_the_longest_catalog_episode() -> None:
    # the environment truncates at its scenario's end; the spec's TimeLimit must never come first
    longest = 0
    for name in catalog.names():
        seed = catalog.seeds(name, "test")[0] if catalog.is_family(name) else 0
        scn = catalog.scenario(name, seed)
        longest = max(longest, round(scn.duration / scn.round_s))
    assert longest == LONGEST_EPISODE_STEPS
    assert all(steps == longest for _, steps in ENVIRONMENTS.values())


def test_a_longer_scenario_warns_about_the_time_limit() -> None:
    gym = pytest.importorskip("gymnasium")
    env = gym.make("pvegym/Cluster-v0", scenario="small", episode_seconds=10.0 * 3000)
    with pytest.warns(UserWarning, match="max_episode_steps=-1"):
        env.reset(seed=0)
    env = gym.make(
        "pvegym/Cluster-v0", scenario="small", episode_seconds=10.0 * 3000, max_episode_steps=-1
    )
    assert not hasattr(env, "_max_episode_steps")  # no TimeLimit wrapper
    # the caller passed its own limit: it says so, and reset has nothing to warn about
    env.unwrapped.warn_time_limit = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env.reset(seed=0)
    assert [str(w.message) for w in caught] == []


def test_make_v0_and_the_bench_loop_print_no_warning() -> None:
    # Cluster-v0 is kept beside v1 on purpose (no "out of date" on make), and the bench's
    # ClusterLoop makes an episode longer than the registered limit with a TimeLimit of its length
    done = _run(
        "import gymnasium as gym\n"
        "import pvegym\n"
        "from pvegym.experiments.bench import ClusterLoop\n"
        "from pvegym.registration import LONGEST_EPISODE_STEPS\n"
        "env = gym.make('pvegym/Cluster-v0', scenario='failure-loop')\n"
        "env.reset(seed=0)\n"
        "env.step(0)\n"
        "loop = ClusterLoop('small', LONGEST_EPISODE_STEPS)\n"
        "loop.run(2)\n"
        "loop.close()\n"
        "print('done')\n"
    )
    assert done.stderr == ""
    assert done.stdout.strip() == "done"
