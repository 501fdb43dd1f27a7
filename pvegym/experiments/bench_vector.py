"""How fast N clusters step together (:mod:`pvegym.vector`), and how long a learner waits on them
(``pvegym bench``'s vector figures; :mod:`pvegym.experiments.bench` has the rest).

* :func:`vector_rows` — per (scenario, N): µs per *sub-environment* step of
  :class:`~pvegym.vector.ClusterVectorEnv` (``Cluster-v1``, the learned balancers' environment)
  with uniformly random masked actions — one ``action_masks()`` of shape (N, A), one batched
  draw of a valid action per row, one ``step`` — beside one ``CartPole-v1`` step through
  ``gymnasium.make`` and a sub-environment step of Gymnasium's ``SyncVectorEnv`` of N CartPoles
  (``gymnasium.make_vec(…, vectorization_mode="sync")``, not CartPole's own NumPy-vectorised
  entry point). The three are timed in alternating blocks (as ``paired_ratio``) and the ratios are
  medians of per-block ratios: ``ratio`` ÷ CartPole, ``sync_ratio`` ÷ the ``SyncVectorEnv``'s.
* :func:`vec_wait_share` — the share of a short training run's wall time the learner spends
  waiting on the environment (``VecEnv.step`` and the action masks MaskablePPO fetches before
  each step), with a train file's algorithm, policy, ``n_envs`` and environment, on the vector
  env ``pvegym train`` uses by default.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

#: (scenario, N, sub-environment steps in all) of the full and the quick run (a bench-large
#: ``Cluster-v1`` sub-step costs ~20× a bench-small one)
FULL_VECTOR = (
    ("bench-small", 1, 4000),
    ("bench-small", 8, 16000),
    ("bench-small", 64, 25600),
    ("bench-large", 8, 1280),
)
QUICK_VECTOR = (("bench-small", 8, 320), ("bench-small", 64, 640), ("bench-large", 2, 10))
#: the train files whose learner's wait is measured (key suffix → file)
WAIT_RUNS = {
    "maskable_ppo": Path("experiments/train-maskable-ppo.toml"),
    "ppo": Path("experiments/train-ppo.toml"),
}


class VectorLoop:
    """``ClusterVectorEnv(n, scenario)`` with uniformly random masked actions (uniforms drawn up
    front; one episode long enough for every timed step)."""

    def __init__(self, scenario: str, n: int, steps: int, warmup: int = 3, seed: int = 0) -> None:
        from pvegym.vector import ClusterVectorEnv

        self.n = n
        self.env = ClusterVectorEnv(
            n, scenario=scenario, episode_seconds=(steps + warmup + 1) * 10.0, copy=False
        )
        self.env.reset(seed=seed)
        self._rng = np.random.default_rng(seed)
        self.run(warmup)  # JIT compilation and caches outside the timing

    def run(self, steps: int) -> float:
        """Seconds of ``steps`` batched steps (masks, batched action draw, step)."""
        env = self.env
        uniforms = self._rng.random((steps, self.n))
        t0 = time.perf_counter()
        for u in uniforms:
            masks = env.action_masks()
            # the k-th valid action per row, k uniform over the row's valid count
            k = (u * masks.sum(axis=1)).astype(np.int64)
            actions = (np.cumsum(masks, axis=1) > k[:, None]).argmax(axis=1)
            env.step(actions)
        return time.perf_counter() - t0

    def close(self) -> None:
        self.env.close()


class CartPoleSyncLoop:
    """Gymnasium's ``SyncVectorEnv`` of ``n`` ``CartPole-v1`` (autoreset included in the step, as
    a vector env has it), random actions drawn up front."""

    def __init__(self, n: int, seed: int = 0) -> None:
        import gymnasium

        self.n = n
        self.env = gymnasium.make_vec("CartPole-v1", num_envs=n, vectorization_mode="sync")
        self.env.reset(seed=seed)
        self._rng = np.random.default_rng(seed)
        self.run(20)

    def run(self, steps: int) -> float:
        env = self.env
        actions = self._rng.integers(0, 2, size=(steps, self.n))
        t0 = time.perf_counter()
        for a in actions:
            env.step(a)
        return time.perf_counter() - t0

    def close(self) -> None:
        self.env.close()


def vector_rows(
    sizes: tuple[tuple[str, int, int], ...], cartpole: Any, cartpole_steps: int, blocks: int
) -> list[dict[str, Any]]:
    """One row per (scenario, N, sub-steps) of ``sizes``: ``{scenario, n, step_us,
    cartpole_step_us, sync_step_us, ratio, sync_ratio}`` (µs per sub-environment step; that many
    sub-environment steps in all, at least one batched step per block). ``cartpole`` is the
    bench's ``CartPoleLoop`` (its ``run(steps)`` → seconds)."""
    rows = []
    for scenario, n, sub_steps in sizes:
        per = max(1, sub_steps // (n * blocks))  # batched steps per block
        loop = VectorLoop(scenario, n, per * blocks)
        sync = CartPoleSyncLoop(n)
        per_cp = max(1, cartpole_steps // blocks)
        per_sync = max(1, per_cp // n)
        us, cp_us, sync_us, ratios, sync_ratios = [], [], [], [], []
        for b in range(blocks):
            order = (0, 1, 2) if b % 2 == 0 else (2, 1, 0)
            got: dict[int, float] = {}
            for which in order:
                if which == 0:
                    got[0] = loop.run(per) / (per * n) * 1e6
                elif which == 1:
                    got[1] = cartpole.run(per_cp) / per_cp * 1e6
                else:
                    got[2] = sync.run(per_sync) / (per_sync * n) * 1e6
            us.append(got[0])
            cp_us.append(got[1])
            sync_us.append(got[2])
            ratios.append(got[0] / got[1])
            sync_ratios.append(got[0] / got[2])
        loop.close()
        sync.close()
        rows.append(
            {
                "scenario": scenario,
                "env": "pvegym/Cluster-v1",
                "n": n,
                "step_us": float(np.median(us)),
                "cartpole_step_us": float(np.median(cp_us)),
                "sync_step_us": float(np.median(sync_us)),
                "ratio": float(np.median(ratios)),
                "sync_ratio": float(np.median(sync_ratios)),
            }
        )
    return rows


def vec_wait_share(train_file: Path, timesteps: int, quick: bool) -> dict[str, Any]:
    """A short run of ``train_file``'s algorithm (its policy, hyperparameters, ``n_envs`` and
    environment) on the default vector env: ``{"share", "wait_s", "learn_s", "timesteps", …}``.
    ``quick`` shrinks the rollout (``n_steps`` 64, ``batch_size`` 64, one epoch) to keep the run
    to seconds; the figure is then only a smoke value."""
    import torch
    from stable_baselines3.common.vec_env import VecEnvWrapper

    from pvegym.learning.train import TimedVecEnv, make_env_fn, make_vec_env
    from pvegym.learning.train_config import algo_class, load_train_config

    cfg = load_train_config(train_file)
    torch.set_num_threads(cfg.torch_threads)
    kwargs = cfg.algo_kwargs()
    if quick and "n_steps" in kwargs:
        kwargs.update(n_steps=64, batch_size=64, n_epochs=1)

    class MaskTimed(TimedVecEnv):
        """Also counts the action masks fetched before each step as waiting on the env."""

        def env_method(self, method_name: str, *args: Any, **kw: Any) -> list[Any]:
            t0 = time.perf_counter()
            out = VecEnvWrapper.env_method(self, method_name, *args, **kw)
            self.wait_s += time.perf_counter() - t0
            return out

    venv = MaskTimed(make_vec_env(cfg.vec_env, [make_env_fn(cfg, None) for _ in range(cfg.n_envs)]))
    venv.seed(cfg.seed)
    model = algo_class(cfg.algo)(cfg.policy, venv, seed=cfg.seed, device="cpu", **kwargs)
    t0 = time.perf_counter()
    model.learn(total_timesteps=timesteps)
    learn_s = time.perf_counter() - t0
    venv.close()
    return {
        "share": venv.wait_s / learn_s,
        "wait_s": venv.wait_s,
        "learn_s": learn_s,
        "timesteps": int(model.num_timesteps),
        "train_file": str(train_file),
        "n_envs": cfg.n_envs,
        "vec_env": cfg.vec_env,
        "hyperparams": {k: v for k, v in kwargs.items() if k != "policy_kwargs"},
    }


__all__ = ["FULL_VECTOR", "QUICK_VECTOR", "WAIT_RUNS", "vec_wait_share", "vector_rows"]
