"""Results are the same on every machine, bit for bit (README, "Determinism across machines").

The committed results once differed between two machines of the same image in the last bits of
``stall_cpu_s``: the M/M/c pressure table was built with NumPy's ``np.log``/``np.exp``/``**``,
which NumPy dispatches by CPU (SVML/AVX-512 code on AVX-512 machines, libm elsewhere). The model
now uses libm alone for transcendental functions, and numba kernels compiled without fastmath.

Two guards: a source check of the layers that compute results and observations, and a run of
episodes and environment steps under NumPy's baseline code and numba's generic CPU target, which
must give exactly what this process gives with the host's best code paths. On a machine with
AVX-512 (where the table differed) the second test fails if CPU-dispatched math creeps back in; on
any machine with FMA it fails if a kernel is compiled with contraction (``fastmath``).
"""

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: the layers whose arithmetic decides metrics, telemetry and observations
RESULT_LAYERS = ("pvegym/sim", "pvegym/env", "policies")

#: NumPy ufuncs with CPU-dispatched SIMD implementations that differ from libm in the last bits
#: (numpy#19478: SVML for AVX-512, up to 4 ULP; numpy#23523, numpy#23289)
DISPATCHED_UFUNCS = frozenset(
    [
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "power",
        "float_power",
        "sin",
        "cos",
        "tan",
        "arcsin",
        "arccos",
        "arctan",
        "arctan2",
        "sinh",
        "cosh",
        "tanh",
        "arcsinh",
        "arccosh",
        "arctanh",
        "cbrt",
    ]
)


def _sources() -> list[Path]:
    files: list[Path] = []
    for layer in RESULT_LAYERS:
        files += sorted((ROOT / layer).rglob("*.py"))
    return files


def test_result_layers_use_no_cpu_dispatched_numpy_math() -> None:
    bad = []
    for f in _sources():
        for node in ast.walk(ast.parse(f.read_text(), filename=str(f))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("np", "numpy")
                and node.attr in DISPATCHED_UFUNCS
            ):
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno} np.{node.attr}")
    assert not bad, "use math.* (libm) instead: " + ", ".join(bad)


def test_kernels_are_compiled_without_fastmath() -> None:
    bad = []
    for f in _sources():
        for node in ast.walk(ast.parse(f.read_text(), filename=str(f))):
            if isinstance(node, ast.Call) and any(k.arg == "fastmath" for k in node.keywords):
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno}")
    assert not bad, "fastmath contracts and reassociates by CPU: " + ", ".join(bad)


# ------------------------------------------------------------------------------ behaviour
#: episodes that exercise every numeric path: the M/M/c table and OU/diurnal/burst workloads
#: (``small`` seeds whose committed rows once differed), live migration (its event loop), traces
EPISODES = (
    ("small", 1000001, "noop"),
    ("small", 1000007, "upstream"),
    ("small", 1000008, "patched"),
    ("nonconverging-migration", 0, "upstream"),
    ("trace", 1000000, "patched"),
)


def fingerprint() -> dict[str, Any]:
    """Metrics of :data:`EPISODES` (repr of every float) and a hash of 60 environment steps'
    observations, rewards and masks, for each observation version."""
    from pvegym.env.cluster_env import ClusterEnv
    from pvegym.env.cluster_env_v1 import ClusterEnvV1
    from pvegym.experiments.record import play
    from pvegym.policies.registry import make_policy
    from pvegym.sim import catalog
    from pvegym.sim.simulation import Simulation

    out: dict[str, Any] = {}
    for name, seed, policy in EPISODES:
        sim = Simulation(catalog.scenario(name, seed, {}), seed)
        pol = make_policy(policy)
        pol.reset(seed)
        result, _ = play(sim, pol.decide, 1800.0)
        out[f"{name}/{seed}/{policy}"] = {k: repr(v) for k, v in result["metrics"].items()}
    # v1: its encoder's log scales, the motion memory's backoff, the noop twin's reward
    envs = {
        "env": ClusterEnv(scenario="small"),
        "env_v1": ClusterEnvV1(scenario="small", reward_baseline="noop", mask_unmigratable=True),
    }
    for key, env in envs.items():
        h = hashlib.sha256()
        obs, _ = env.reset(seed=3)
        h.update(obs.tobytes())
        for step in range(60):
            mask = env.action_masks()
            h.update(mask.tobytes())
            legal = np.flatnonzero(mask)
            obs, reward, _, _, _ = env.step(int(legal[(7 * step) % legal.size]))
            h.update(obs.tobytes() + np.float64(reward).tobytes())
        out[key] = h.hexdigest()
    return out


def test_same_results_with_baseline_numpy_and_generic_numba(tmp_path: Path) -> None:
    env = {
        **os.environ,
        # NumPy: baseline code paths only (names of numpy ≥ 2.4 and of older releases; unknown
        # names are ignored)
        "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR AVX512F AVX512_SKX AVX2 FMA3",
        # numba: generic x86-64 (no FMA, no AVX), compiled afresh into a private cache
        "NUMBA_CPU_NAME": "generic",
        "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
    }
    proc = subprocess.run(
        [sys.executable, __file__],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    baseline = json.loads(proc.stdout)
    host = fingerprint()
    assert host == baseline


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(json.dumps(fingerprint()))
