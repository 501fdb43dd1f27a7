"""A permutation-equivariant actor-critic for ``pvegym/Cluster-v1`` (stable-baselines3 / sb3-contrib).

Why not an MLP over the flat vector: the action "move guest g to node n" is one of
``1 + max_guests · max_nodes`` outputs, and a flat network must learn each of them separately —
behaviour cloning of ``guest-centric`` with one reached 0.5 % recall of its moves. Which guest
goes where is a property of the guest, its node and the target, the same for every slot. So:

* **pair scorer** — one small network, shared by every (guest, target) pair, scores a move from
  the guest's embedding (its features and its current node's), the target's embedding, the pair's
  own features (layout ``PAIR_FEATURES``: memory of this guest on that node, the target's load
  after receiving it) and a cluster context. Renaming guests or nodes permutes the scores the same
  way (equivariance); a cluster of any size up to the padding is scored by the same weights.
* **noop head** — action 0's score from the cluster context, plus ``log`` of the number of moves
  the observation allows, plus a bias set so that at initialisation (move scores 0)
  ``P(noop) = noop_prob`` (0.9): a fresh or cloned policy does not start by moving at random in
  most rounds, and the bias does not depend on the cluster's size.
* **value** — from its own embeddings and context (the PPO value loss does not move the features
  the policy was cloned with). Only the value sees ``time_frac``: an episode ends, a cluster does
  not, so the actor's choice must not depend on how far into the training episode it is (a
  deployed agent runs for days; the field scenarios run up to 8 h against 1 h training episodes).
* **deterministic action: act, then choose** — the most probable single action is a poor
  deterministic rule here: a policy that is 80 % sure some move is due, spread over ten similar
  moves, has its largest single probability on no motion (the first agents' argmax was no motion
  in every state for this reason). :func:`greedy_actions` moves when the probability of moving at
  all exceeds that of waiting (``logsumexp`` of the move scores > the noop score), and then takes
  the most probable move. Sampled actions are the distribution's.
* **structural mask** — moves the observation itself rules out (padding, an offline or absent
  node, the guest's own node, a guest not ``started``, a busy pipeline) get a score of −10⁹, so
  plain PPO (no action mask) works too; MaskablePPO applies the environment's mask on top
  (affinity rules, migratability when the environment masks it).

Context = an MLP of the global features and the mean and max of the node and guest embeddings over
real slots (permutation-invariant). Constructor arguments are plain data (``layout`` dict, ints,
floats), so a saved model is described by its config without pickled classes; the classes are
found by name through :data:`POLICY_CLASSES`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn

from pvegym.env import observation_layout as L

#: score of a structurally impossible move (finite, so that log-probabilities stay finite)
IMPOSSIBLE = -1e9


def _mlp(sizes: list[int], last_act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for k in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[k], sizes[k + 1]))
        if last_act or k < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class _SetEncoder(nn.Module):
    """Node and guest embeddings and the permutation-invariant cluster context."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        n_nf, n_gf = len(L.NODE_FEATURES), len(L.GUEST_FEATURES)
        self.node = _mlp([n_nf, hidden, hidden])
        self.guest = _mlp([n_gf + n_nf, hidden, hidden])
        self.context = _mlp([len(L.GLOBAL_FEATURES) + 4 * hidden, hidden, hidden])

    def forward(
        self,
        glob: th.Tensor,
        nodes: th.Tensor,
        guests_src: th.Tensor,
        node_present: th.Tensor,
        guest_present: th.Tensor,
    ) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        e_n = self.node(nodes) * node_present[..., None]
        e_g = self.guest(guests_src) * guest_present[..., None]
        ctx = self.context(
            th.cat(
                [
                    glob,
                    _masked_mean(e_n, node_present),
                    _masked_max(e_n, node_present),
                    _masked_mean(e_g, guest_present),
                    _masked_max(e_g, guest_present),
                ],
                dim=-1,
            )
        )
        return e_n, e_g, ctx


def _masked_mean(x: th.Tensor, present: th.Tensor) -> th.Tensor:
    return (x * present[..., None]).sum(1) / present.sum(1, keepdim=True).clamp(min=1.0)


def _masked_max(x: th.Tensor, present: th.Tensor) -> th.Tensor:
    filled = x.masked_fill(present[..., None] <= 0.0, -1e4)
    out = filled.max(1).values
    return th.where(present.sum(1, keepdim=True) > 0, out, th.zeros_like(out))


class PairScorerNet(nn.Module):
    """``features → (action logits, value latent)``: SB3's ``mlp_extractor`` slot.

    ``latent_dim_pi`` is the number of actions (the logits are the policy latent; the policy's
    ``action_net`` is the identity), ``latent_dim_vf`` the value head's hidden size.
    """

    def __init__(
        self,
        layout: dict[str, Any],
        hidden: int = 64,
        noop_prob: float = 0.9,
        pair_layers: int = 1,
    ) -> None:
        super().__init__()
        if layout.get("version") != L.VERSION:
            raise ValueError(f"layout {layout.get('version')!r} is not {L.VERSION!r}")
        if not 0.0 < noop_prob < 1.0:
            raise ValueError(f"noop_prob must be in (0, 1), not {noop_prob!r}")
        self.lay = L.Layout(int(layout["max_nodes"]), int(layout["max_guests"]))
        self.hidden = hidden
        self.latent_dim_pi = self.lay.n_actions
        self.latent_dim_vf = hidden
        self.pi_sets = _SetEncoder(hidden)
        self.vf_sets = _SetEncoder(hidden)
        n_pf = len(L.PAIR_FEATURES)
        self.w_guest = nn.Linear(hidden, hidden)
        self.w_node = nn.Linear(hidden, hidden, bias=False)
        self.w_pair = nn.Linear(n_pf, hidden, bias=False)
        self.w_ctx = nn.Linear(hidden, hidden, bias=False)
        # hidden layers over the (guest, node, pair, context) projections: the pair tensor is
        # batch × guests × nodes × hidden, and each layer beyond the first costs ~6× the first
        if pair_layers < 1:
            raise ValueError(f"pair_layers must be ≥ 1, not {pair_layers!r}")
        self.score = _mlp([hidden] * pair_layers + [1], last_act=False)
        self.noop = _mlp([hidden, hidden, 1], last_act=False)
        self.value = _mlp([hidden, hidden])
        # start: every move scores 0 and noop log(K · p / (1 − p)) for K allowed moves
        for head in (self.score, self.noop):
            last = head[-1]
            assert isinstance(last, nn.Linear)
            nn.init.zeros_(last.weight)
            nn.init.zeros_(last.bias)
        self.noop_bias = nn.Parameter(th.tensor(math.log(noop_prob / (1.0 - noop_prob))))
        # feature indices
        self._present_n = L.N_INDEX["present"]
        self._online_n = L.N_INDEX["online"]
        self._present_g = L.GU_INDEX["present"]
        self._node_g = L.GU_INDEX["node"]
        self._started_g = L.GU_INDEX["started"]
        self._active = L.G_INDEX["motion_active"]
        keep = th.ones(len(L.GLOBAL_FEATURES))
        keep[L.G_INDEX["time_frac"]] = 0.0
        self._actor_globals: th.Tensor
        self.register_buffer("_actor_globals", keep, persistent=False)
        # node indices are identifiers: decoded for the guest's own node, never a network input
        # (an input would tie the scores to slot order and break the equivariance)
        ids = th.ones(len(L.GUEST_FEATURES))
        ids[L.GU_INDEX["node"]] = 0.0
        ids[L.GU_INDEX["target"]] = 0.0
        self._guest_inputs: th.Tensor
        self.register_buffer("_guest_inputs", ids, persistent=False)

    # ------------------------------------------------------------------ decoding
    def _split(self, x: th.Tensor, lay: L.Layout | None = None) -> dict[str, th.Tensor]:
        lay = lay or self.lay
        b = x.shape[0]
        mn, mg = lay.max_nodes, lay.max_guests
        glob = x[:, : lay.n_global]
        nodes = x[:, lay.node_offset : lay.guest_offset].reshape(b, -1, mn).transpose(1, 2)
        guests = x[:, lay.guest_offset : lay.pair_offset].reshape(b, -1, mg).transpose(1, 2)
        pairs = x[:, lay.pair_offset :].reshape(b, -1, mg, mn).permute(0, 2, 3, 1)
        node_present = nodes[..., self._present_n]
        guest_present = guests[..., self._present_g]
        own = th.round(guests[..., self._node_g] * L.NODE_INDEX_SCALE) - 1.0  # −1: none
        onehot = (own[..., None] == th.arange(mn, device=x.device, dtype=x.dtype)).to(x.dtype)
        src = th.bmm(onehot, nodes)  # the guest's node's features
        possible = (
            (guest_present * guests[..., self._started_g])[..., None]
            * (node_present * nodes[..., self._online_n])[:, None, :]
            * (1.0 - onehot)
            * (1.0 - glob[:, self._active])[:, None, None]
        )
        return {
            "glob": glob,
            "nodes": nodes,
            "guests_src": th.cat([guests * self._guest_inputs, src], dim=-1),
            "pairs": pairs,
            "node_present": node_present,
            "guest_present": guest_present,
            "possible": possible,
        }

    # ------------------------------------------------------------------ heads
    def forward_actor(self, features: th.Tensor, lay: L.Layout | None = None) -> th.Tensor:
        """Action logits ``[batch, 1 + max_guests · max_nodes]``; ``lay``: the observation's
        layout when it is not the one the network was built for (the weights fit any)."""
        d = self._split(features, lay)
        glob = d["glob"] * self._actor_globals
        e_n, e_g, ctx = self.pi_sets(
            glob, d["nodes"], d["guests_src"], d["node_present"], d["guest_present"]
        )
        h = th.relu(
            self.w_guest(e_g)[:, :, None, :]
            + self.w_node(e_n)[:, None, :, :]
            + self.w_pair(d["pairs"])
            + self.w_ctx(ctx)[:, None, None, :]
        )
        scores = self.score(h).squeeze(-1)  # [B, G, N]
        possible = d["possible"]
        scores = th.where(possible > 0.5, scores, th.full_like(scores, IMPOSSIBLE))
        k = possible.sum(dim=(1, 2))
        noop = self.noop(ctx).squeeze(-1) + self.noop_bias + th.log(k.clamp(min=1.0))
        return th.cat([noop[:, None], scores.reshape(scores.shape[0], -1)], dim=1)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        d = self._split(features)
        _, _, ctx = self.vf_sets(
            d["glob"], d["nodes"], d["guests_src"], d["node_present"], d["guest_present"]
        )
        out: th.Tensor = self.value(ctx)
        return out

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)


def greedy_actions(logits: th.Tensor) -> th.Tensor:
    """Deterministic actions from (masked) logits ``[batch, 1 + moves]``: no motion unless moving
    at all is more probable than waiting, else the most probable move."""
    move = logits[:, 1:]
    act = th.logsumexp(move, dim=1) > logits[:, 0]
    return th.where(act, move.argmax(dim=1) + 1, th.zeros_like(act, dtype=th.long))


class _PairScorerMixin:
    """What the PPO and MaskablePPO variants share: the layout's checks and the network's
    constructor arguments, the extractor, an identity action net (and the optimizer over it)
    and the deterministic rule of :func:`greedy_actions`. It comes first in each variant's bases,
    so ``super()`` is SB3's policy class."""

    pair_kwargs: dict[str, Any]
    mlp_extractor: Any
    action_net: nn.Module
    optimizer: Any
    optimizer_class: Any
    optimizer_kwargs: dict[str, Any]

    def __init__(
        self,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        lr_schedule: Any,
        layout: dict[str, Any],
        hidden: int = 64,
        noop_prob: float = 0.9,
        pair_layers: int = 1,
        **kwargs: Any,
    ) -> None:
        _check_spaces(observation_space, action_space, layout)
        self.pair_kwargs = {
            "layout": dict(layout),
            "hidden": int(hidden),
            "noop_prob": float(noop_prob),
            "pair_layers": int(pair_layers),
        }
        kwargs.setdefault("ortho_init", False)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)  # type: ignore[call-arg]

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = PairScorerNet(**self.pair_kwargs)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)  # type: ignore[misc]
        self.action_net = nn.Identity()
        # SB3 built the optimizer over the linear action net it made; again over ours
        self.optimizer = self.optimizer_class(
            self.parameters(),  # type: ignore[attr-defined]
            lr=lr_schedule(1),
            **self.optimizer_kwargs,
        )

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data: dict[str, Any] = super()._get_constructor_parameters()  # type: ignore[misc]
        data.update(self.pair_kwargs)
        return data

    def _masked_logits(self, observation: th.Tensor, action_masks: Any) -> th.Tensor:
        features = self.extract_features(observation)  # type: ignore[attr-defined]
        logits: th.Tensor = self.mlp_extractor.forward_actor(features)
        if action_masks is not None:
            m = th.as_tensor(action_masks, dtype=th.bool, device=logits.device)
            logits = th.where(m.reshape(logits.shape), logits, th.full_like(logits, -th.inf))
        return logits


def _check_spaces(
    observation_space: spaces.Space[Any], action_space: spaces.Space[Any], layout: dict[str, Any]
) -> None:
    lay = L.Layout(int(layout["max_nodes"]), int(layout["max_guests"]))
    if observation_space.shape != (lay.size,):
        raise ValueError(
            f"observation shape {observation_space.shape} is not layout v1's {(lay.size,)} "
            f"for {lay.max_nodes} nodes × {lay.max_guests} guests (use pvegym/Cluster-v1)"
        )
    if not isinstance(action_space, spaces.Discrete) or int(action_space.n) != lay.n_actions:
        raise ValueError(f"action space {action_space} is not Discrete({lay.n_actions})")


class PairScorerPolicy(_PairScorerMixin, ActorCriticPolicy):
    """The pair scorer for PPO (the structural mask replaces the action mask)."""

    def _predict(self, observation: Any, deterministic: bool = False) -> th.Tensor:
        if deterministic:
            return greedy_actions(self._masked_logits(observation, None))
        return super()._predict(observation, deterministic)


class MaskablePairScorerPolicy(_PairScorerMixin, MaskableActorCriticPolicy):
    """The pair scorer for MaskablePPO."""

    def _predict(
        self, observation: Any, deterministic: bool = False, action_masks: Any = None
    ) -> th.Tensor:
        if deterministic:
            return greedy_actions(self._masked_logits(observation, action_masks))
        return super()._predict(observation, deterministic, action_masks)


#: policy name -> class per algorithm family (``"maskable"`` for MaskablePPO, ``"plain"`` else):
#: a train file names a policy, a loader resolves the class by that name (no pickled classes).
POLICY_CLASSES: dict[str, dict[str, type[Any]]] = {
    "PairScorer": {"plain": PairScorerPolicy, "maskable": MaskablePairScorerPolicy},
}


def policy_class(name: str, maskable: bool) -> type[Any]:
    """The registered policy class ``name`` for a maskable algorithm or not."""
    return POLICY_CLASSES[name]["maskable" if maskable else "plain"]


def action_probabilities(
    policy: ActorCriticPolicy,
    obs: np.ndarray,
    mask: np.ndarray | None,
    lay: L.Layout | None = None,
) -> np.ndarray:
    """The policy's action distribution on one observation (and mask), as probabilities;
    ``lay``: the observation's layout if not the network's own."""
    with th.no_grad():
        x = th.as_tensor(obs[None, :], dtype=th.float32)
        net: PairScorerNet = policy.mlp_extractor  # type: ignore[assignment]
        logits = net.forward_actor(x, lay)[0]
        if mask is not None:
            logits = th.where(th.as_tensor(mask), logits, th.full_like(logits, -math.inf))
        return th.softmax(logits, dim=0).numpy()


def predict_in_layout(
    policy: ActorCriticPolicy,
    obs: np.ndarray,
    mask: np.ndarray | None,
    lay: L.Layout,
    deterministic: bool,
) -> int:
    """The action of a pair-scorer policy on an observation of another padding than it was built
    for (``lay``: a cluster larger than the training family's): the same rule as ``predict`` —
    :func:`greedy_actions` when deterministic, else a sample of the masked distribution drawn from
    torch's generator as SB3 draws it."""
    with th.no_grad():
        x = th.as_tensor(obs[None, :], dtype=th.float32)
        net: PairScorerNet = policy.mlp_extractor  # type: ignore[assignment]
        logits = net.forward_actor(x, lay)
        if mask is not None:
            m = th.as_tensor(mask[None, :], dtype=th.bool)
            logits = th.where(m, logits, th.full_like(logits, -th.inf))
        if deterministic:
            return int(greedy_actions(logits)[0])
        return int(th.distributions.Categorical(logits=logits).sample()[0])


__all__ = [
    "POLICY_CLASSES",
    "MaskablePairScorerPolicy",
    "PairScorerNet",
    "PairScorerPolicy",
    "action_probabilities",
    "greedy_actions",
    "policy_class",
    "predict_in_layout",
]
