"""Behaviour cloning with learner-collected data (DAgger), then a critic for the cloned policy.

Why: PPO from scratch on this problem spends ~100k+ steps before it moves at all (the reward of a
move arrives minutes later, after a migration, and most moves cost more than they bring), and a
memoryless random start repeats failing moves. A heuristic that already balances well
(``guest-centric``) shows which (guest, target) pairs matter; cloning it gives PPO a policy worth
improving. Plain cloning trains only on the expert's states, and the learner, once it deviates,
meets states the expert never led to (compounding errors); DAgger (Ross, Gordon & Bagnell 2011)
lets the learner drive and asks the expert what it would have done there.

One episode of collection runs the environment with every round decided (the expert is a
stateful balancer: it must see every round's view, including the busy ones), and groups rounds
into *decisions* exactly as the training environment with ``skip_idle_rounds`` does: a decision is
a round in which some motion is possible (or the first round), and its reward is everything up to
the next decision. So the cloned policy's states and the critic's returns are those PPO will see.

The expert's answer on a decision state is its label (its motion encoded as an action; one the
mask forbids counts as no motion). A privileged expert (``pvegym.learning.lookahead``, one
with ``bind``) is bound to the episode's simulation after each reset. When the learner acts instead, the expert is told
(``adopt(view, motion)`` when it has it), so that its outcome tracking follows the trajectory
that really happened.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch as th
from numpy.typing import NDArray

from pvegym.env import observation_layout as L
from pvegym.env.cluster_env import ClusterEnv
from pvegym.learning.lookahead import make_expert
from pvegym.learning.pair_policy import greedy_actions
from pvegym.learning.train_config import ImitationOptions


@dataclass
class Batch:
    """Decision states of some episodes: observation, mask, the expert's action (label), the
    action taken, the reward up to the next decision and whether the episode ended there."""

    obs: list[NDArray[np.float32]] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)  # importance weight of the sample
    masks: list[NDArray[np.bool_]] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    taken: list[int] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    dones: list[bool] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)  # each episode's final info

    def __len__(self) -> int:
        return len(self.labels)

    def extend(self, other: Batch) -> None:
        for name in ("obs", "weights", "masks", "labels", "taken", "rewards", "dones", "infos"):
            getattr(self, name).extend(getattr(other, name))


@dataclass
class CollectStats:
    """Time (s) spent in the environment and in the expert's decisions while collecting."""

    env_s: float = 0.0
    expert_s: float = 0.0
    learner_s: float = 0.0
    episodes: int = 0
    decisions: int = 0
    expert_moves: int = 0
    learner_moves: int = 0
    agreement: int = 0  # decisions on which the learner's argmax equals the label

    def as_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in self.__dict__.items()}


def learner_actions(
    policy: Any, obs: NDArray[np.float32], masks: NDArray[np.bool_]
) -> NDArray[np.int64]:
    """The policy's deterministic actions (a batch) under ``masks``, as deployed: the pair
    scorer's :func:`~pvegym.learning.pair_policy.greedy_actions`."""
    with th.no_grad():
        logits = policy._masked_logits(th.as_tensor(obs), masks)
        out: NDArray[np.int64] = greedy_actions(logits).numpy()
    return out


def _start_expert(expert: Any, env: ClusterEnv) -> None:
    """Reset ``expert`` for the episode ``env`` just started; a privileged expert (one with
    ``bind``: :class:`~pvegym.learning.lookahead.LookaheadExpert`) is bound to its simulation
    (a new one when the family instance changed)."""
    bind = getattr(expert, "bind", None)
    if bind is not None:
        bind(env.sim)
    expert.reset(env.episode_seed)


def collect_episode(
    env: ClusterEnv,
    instance: int,
    episode_seed: int,
    expert: Any,
    policy: Any | None,
    beta: float,
    rng: np.random.Generator,
    stats: CollectStats,
    calm_keep: float = 1.0,
) -> Batch:
    """One episode on family instance ``instance``: the expert acts with probability ``beta`` at
    each decision, the learner (``policy``'s argmax; ``None``: always the expert) otherwise.

    A *calm* decision — no online node's PSI some at the pressure gate (``pressure_max``), the
    expert answering no motion — is kept as a sample with probability ``calm_keep`` and weight
    ``1 / calm_keep`` (the loss stays unbiased; most rounds of a cluster are calm and teach one
    thing, to wait). Rewards and the trajectory are those of every decision regardless."""
    gate = env.memory_options.pressure_pct / 100.0 if hasattr(env, "memory_options") else 0.1
    pmax = L.G_INDEX["pressure_max"]
    out = Batch()
    t0 = time.perf_counter()
    obs, _ = env.reset(seed=episode_seed, options={"instance_seed": instance})
    stats.env_s += time.perf_counter() - t0
    _start_expert(expert, env)
    adopt = getattr(expert, "adopt", None)
    first = True
    pending = 0.0
    while True:
        view = env.view
        t0 = time.perf_counter()
        motion = expert.decide(view)
        stats.expert_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        mask = env.action_masks()
        decision = first or mask.sum() > 1
        label = env.encode_motion(motion) if motion is not None else 0
        if not mask[label]:
            label = 0
        action = 0
        if decision:
            if out.labels:  # the previous decision's reward ends here
                out.rewards[-1] = pending
                pending = 0.0
            stats.env_s += time.perf_counter() - t0
            learner = -1
            if policy is not None:
                t1 = time.perf_counter()
                learner = int(learner_actions(policy, obs[None, :], mask[None, :])[0])
                stats.learner_s += time.perf_counter() - t1
                stats.agreement += int(learner == label)
            action = label if policy is None or rng.random() < beta else learner
            if action != label and action and adopt is not None and env.decode_action(action):
                decided = env.decode_action(action)
                assert decided is not None
                adopt(view, decided)
            calm = label == 0 and obs[pmax] < gate
            out.weights.append(
                1.0 if not calm else (1.0 / calm_keep if rng.random() < calm_keep else 0.0)
            )
            out.obs.append(obs)
            out.masks.append(mask)
            out.labels.append(label)
            out.taken.append(action)
            out.rewards.append(0.0)
            out.dones.append(False)
            stats.decisions += 1
            stats.expert_moves += int(label != 0)
            stats.learner_moves += int(action != 0 and action != label)
            t0 = time.perf_counter()
        obs, reward, _, truncated, info = env.step(action)
        stats.env_s += time.perf_counter() - t0
        pending += float(reward)
        first = False
        if truncated:
            out.rewards[-1] = pending
            out.dones[-1] = True
            out.infos.append(info)
            stats.episodes += 1
            return out


def train_bc(
    policy: Any, data: Batch, opts: ImitationOptions, rng: np.random.Generator
) -> dict[str, float]:
    """``opts.epochs`` passes of masked cross-entropy toward the labels over all of ``data``."""
    keep = np.flatnonzero(np.asarray(data.weights) > 0.0)
    obs = th.as_tensor(np.stack([data.obs[i] for i in keep]))
    masks = th.as_tensor(np.stack([data.masks[i] for i in keep]))
    labels = th.as_tensor(np.asarray(data.labels, dtype=np.int64)[keep])
    sample_w = th.as_tensor(np.asarray(data.weights, dtype=np.float32)[keep])
    weights = th.where(labels > 0, opts.move_weight, 1.0).float() * sample_w
    params = [p for n, p in policy.named_parameters() if not _is_value_param(n)]
    optim = th.optim.Adam(params, lr=opts.learning_rate)
    n = int(keep.size)
    policy.set_training_mode(True)
    loss_sum = 0.0
    for _ in range(opts.epochs):
        order = rng.permutation(n)
        loss_sum = 0.0
        for start in range(0, n, opts.batch_size):
            idx = th.as_tensor(order[start : start + opts.batch_size])
            logits = policy.mlp_extractor.forward_actor(obs[idx])
            logits = th.where(masks[idx], logits, th.full_like(logits, -1e9))
            nll = th.nn.functional.cross_entropy(logits, labels[idx], reduction="none")
            loss = (nll * weights[idx]).sum() / weights[idx].sum()
            optim.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(params, 1.0)
            optim.step()
            loss_sum += float(loss.detach()) * len(idx)
    policy.set_training_mode(False)
    pred = np.concatenate(
        [
            learner_actions(policy, obs[s : s + 1024].numpy(), masks[s : s + 1024].numpy())
            for s in range(0, n, 1024)
        ]
    )
    lab = labels.numpy()
    moves = lab > 0
    return {
        "dataset_samples": float(n),
        "dataset_decisions": float(len(data)),
        "moved_when_expert_moved": float(np.mean(pred[moves] > 0)) if moves.any() else 1.0,
        "loss": loss_sum / max(n, 1),
        "accuracy": float(np.mean(pred == lab)),
        "move_recall": float(np.mean(pred[moves] == lab[moves])) if moves.any() else 1.0,
        "move_precision": float(np.mean(pred[pred > 0] == lab[pred > 0]))
        if (pred > 0).any()
        else 1.0,
        "dataset_expert_moves": float(moves.sum()),
        "dataset_clone_moves": float((pred > 0).sum()),
    }


def _is_value_param(name: str) -> bool:
    return name.startswith(("value_net", "mlp_extractor.vf_sets", "mlp_extractor.value"))


def fit_value(
    policy: Any,
    data: Batch,
    gamma: float,
    epochs: int,
    batch_size: int,
    lr: float,
    rng: np.random.Generator,
) -> dict[str, float]:
    """Regress the value head on the discounted returns of ``data``'s episodes (per decision)."""
    rewards = np.asarray(data.rewards, dtype=np.float64)
    dones = np.asarray(data.dones, dtype=bool)
    returns = np.zeros_like(rewards)
    acc = 0.0
    for k in range(len(rewards) - 1, -1, -1):
        if dones[k]:
            acc = 0.0
        acc = rewards[k] + gamma * acc
        returns[k] = acc
    obs = th.as_tensor(np.stack(data.obs))
    target = th.as_tensor(returns, dtype=th.float32)
    params = [p for n, p in policy.named_parameters() if _is_value_param(n)]
    optim = th.optim.Adam(params, lr=lr)
    n = len(rewards)
    policy.set_training_mode(True)
    for _ in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            idx = th.as_tensor(order[start : start + batch_size])
            values = policy.predict_values(obs[idx]).squeeze(-1)
            loss = th.nn.functional.mse_loss(values, target[idx])
            optim.zero_grad()
            loss.backward()
            optim.step()
    policy.set_training_mode(False)
    with th.no_grad():
        pred = np.concatenate(
            [
                policy.predict_values(obs[s : s + 1024]).squeeze(-1).numpy()
                for s in range(0, n, 1024)
            ]
        )
    var = float(np.var(returns))
    return {
        "samples": float(n),
        "return_std": float(np.sqrt(var)),
        "explained_variance": float(1.0 - np.var(returns - pred) / var) if var > 0 else 0.0,
    }


def dagger(
    policy: Any,
    make_env: Any,
    opts: ImitationOptions,
    instances: NDArray[np.int64],
    gamma: float,
    seed: int,
    log: Any = None,
) -> dict[str, Any]:
    """Clone ``opts.expert`` into ``policy`` (an SB3 actor-critic policy) with DAgger, then fit its
    critic. ``make_env()`` builds the training environment (``skip_idle_rounds`` off: every round is
    decided here); episodes draw family instances from ``instances``. Returns what happened, per
    iteration (collection, times, BC accuracy), for the manifest."""
    rng = np.random.default_rng([seed, 7])
    env = make_env()
    expert = make_expert(opts.expert, "imitation.expert_params", **opts.expert_params)
    data = Batch()
    report: dict[str, Any] = {"iterations": []}
    t_start = time.perf_counter()
    for it in range(opts.iterations):
        stats = CollectStats()
        beta = opts.beta**it
        t0 = time.perf_counter()
        for _ in range(opts.episodes):
            instance = int(instances[rng.integers(instances.size)])
            ep_seed = int(rng.integers(0, 2**31 - 1))
            data.extend(
                collect_episode(
                    env,
                    instance,
                    ep_seed,
                    expert,
                    policy if it else None,
                    beta,
                    rng,
                    stats,
                    opts.calm_keep,
                )
            )
        collect_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        bc = train_bc(policy, data, opts, rng)
        row = {
            "iteration": it,
            "beta": beta,
            "collect_s": collect_s,
            "train_s": time.perf_counter() - t0,
            **stats.as_dict(),
            **bc,
        }
        report["iterations"].append(row)
        if log is not None:
            log(row)
    value: dict[str, Any] = {}
    if opts.value_episodes and opts.value_epochs:
        stats = CollectStats()
        t0 = time.perf_counter()
        fresh = Batch()
        for _ in range(opts.value_episodes):
            instance = int(instances[rng.integers(instances.size)])
            ep_seed = int(rng.integers(0, 2**31 - 1))
            fresh.extend(collect_episode(env, instance, ep_seed, expert, policy, 0.0, rng, stats))
        collect_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        value = fit_value(
            policy, fresh, gamma, opts.value_epochs, opts.batch_size, opts.learning_rate, rng
        )
        value.update(
            {"collect_s": collect_s, "train_s": time.perf_counter() - t0, **stats.as_dict()}
        )
        if log is not None:
            log({"value": value})
    report["value"] = value
    report["wall_s"] = time.perf_counter() - t_start
    report["env_s"] = sum(r["env_s"] for r in report["iterations"]) + value.get("env_s", 0.0)
    report["expert_s"] = sum(r["expert_s"] for r in report["iterations"]) + value.get(
        "expert_s", 0.0
    )
    return report


__all__ = ["Batch", "collect_episode", "dagger", "fit_value", "learner_actions", "train_bc"]
