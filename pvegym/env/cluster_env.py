"""``pvegym/Cluster-v0``: the HA manager's CRM round as a Gymnasium step, the agent as its balancer."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, SupportsFloat

import gymnasium
import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from pvegym.env.encoding import encode, fill_mask
from pvegym.errors import ConfigError
from pvegym.sim import catalog
from pvegym.sim.affinity import rebalance_movable
from pvegym.sim.cost import BALANCER_COST, RunningCost
from pvegym.sim.families import TEST_SEEDS, TRAIN_SEEDS
from pvegym.sim.kernel import entry_point
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.sim.scenario import TELEMETRY_FIELDS, Scenario
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import ClusterView, Motion, guest_cpu_cap
from pvegym.units import GiB

#: The reward's default cost weights, by metric name (``docs/reward.md``; :data:`pvegym.sim.cost.BALANCER_COST`:
#: the objective the tuning study minimizes).
DEFAULT_REWARD_WEIGHTS: dict[str, float] = dict(BALANCER_COST)
#: What the reward is measured against: nothing, or a ``noop`` twin of the episode.
REWARD_BASELINES = ("none", "noop")

#: Size normalisers (observation features are in [0, 1]).
CORES_SCALE = 128.0  # cores
NODE_MEM_SCALE = 1024.0 * GiB  # bytes
GUEST_CPU_SCALE = 64.0  # vCPUs
GUEST_MEM_SCALE = 256.0 * GiB  # bytes

#: Observation layout — globals, then node features × max_nodes, then guest features × max_guests,
#: each block feature-major (``obs[off + f * max + i]``). Padding slots are all zero.
GLOBAL_FEATURES: tuple[str, ...] = (
    "time_frac",  # simulated time / episode length
    "motion_active",  # the pipeline is busy: only action 0 is valid
    "nodes_frac",  # real nodes / max_nodes
    "guests_frac",  # real HA guests / max_guests
    "imbalance",  # normalized CV of telemetry node loads (cpu/maxcpu + mem/maxmem)/2, clipped to 1
    "result_ok",  # a motion result (success) arrived this round
    "result_failed",  # a motion result (failure) arrived this round
    *(f"missing_{f}" for f in TELEMETRY_FIELDS),  # 1 when that telemetry field reads NaN
)
NODE_FEATURES: tuple[str, ...] = (
    "present",
    "online",
    "maxcpu",  # cores / 128
    "maxmem",  # bytes / 1 TiB
    "cpu",  # cpu / maxcpu
    "mem",  # mem / maxmem
    "cpu_some",  # PSI avg10 / 100
    "mem_some",
    "mem_full",
    "guests",  # HA guests on the node / max_guests
)
GUEST_FEATURES: tuple[str, ...] = (
    "present",
    "node",  # (node index + 1) / max_nodes
    "target",  # (motion target + 1) / max_nodes, 0 when not moving
    "started",  # HA state started (movable)
    "moving",  # in migrate/relocate
    "running",
    "maxcpu",  # vCPUs / 64
    "maxmem",  # bytes / 256 GiB
    "cpu",  # cores / vCPUs
    "mem",  # balloon view / maxmem
    "memhost",  # host footprint / maxmem
    "cpu_some",  # guest PSI avg10 / 100
    "cpu_full",
    "mem_some",
    "mem_full",
    "migratable",
)


class ClusterEnv(gymnasium.Env[NDArray[np.float32], np.int64]):
    """A Proxmox VE HA cluster whose automatic load balancer is the agent.

    ## Description

    Each step is one CRM round of the HA manager (``round_s``, 10 s of simulated time): the agent
    answers the round's balancer call with at most one motion (migrate/relocate a service and its
    positive-affinity bundle), the HA manager queues it, and the model simulates the cluster —
    workloads, CPU and memory contention, PSI, the motion pipeline (live migration pre-copy,
    container relocation) — until the next round. The agent sees only telemetry: the
    :class:`~pvegym.sim.view.ClusterView` an HA manager sees (``env.unwrapped.view``), never ground
    truth. ``scenario`` is any name of the scenario catalog (:mod:`pvegym.sim.catalog`: a named
    scenario, a randomized family such as ``small``, or a ``.toml`` file) or a :class:`Scenario`.

    ## Action Space

    ``Discrete(1 + max_guests * max_nodes)``. ``0`` = no motion; ``k ≥ 1`` = move HA guest
    ``g = (k - 1) // max_nodes`` (index into ``view.sids``) to node ``n = (k - 1) % max_nodes``
    (index into ``view.node_names``). Sizes are padded to the family's maximum (a named scenario's
    own sizes). ``action_masks()`` (sb3-contrib convention, on the environment itself) marks the
    motions the HA manager would accept now (``Simulation.motion_possible``: an existing started
    guest, another online node, an idle pipeline, no negative-affinity partner there). Action 0 is
    always valid. A masked action is a no-op counted in ``info["invalid_action"]``.
    ``encode_motion``/``decode_action`` convert between actions and :class:`Motion`.

    ## Observation Space

    ``Box(0, 1, (len(GLOBAL_FEATURES) + len(NODE_FEATURES) * max_nodes
    + len(GUEST_FEATURES) * max_guests,), float32)``: globals, then each node feature for all node
    slots, then each guest feature for all guest slots (see :data:`GLOBAL_FEATURES`,
    :data:`NODE_FEATURES`, :data:`GUEST_FEATURES`). Telemetry switched off (NaN) reads 0 and sets its
    ``missing_*`` global flag. Padding slots are 0 (their ``present`` feature is 0).

    ## Rewards

    Minus what the step (all rounds it covers) added to the episode's cost
    ``Σ_m w_m · metric_m`` (:mod:`pvegym.sim.cost`: weights by metric name, as a tuning
    objective's, metrics that add up round by round only), divided by ``reward_scale``; bytes of a
    migration in flight count as they are sent. Weights: ``reward_weights`` (default
    :data:`DEFAULT_REWARD_WEIGHTS`, the tuning study's objective). The first step's reward also
    carries the first round (simulated by ``reset``), so the episode's rewards sum to minus the
    weighted cost of the final metrics (over ``reward_scale``).

    With ``reward_baseline="noop"`` a twin simulation of the same scenario and episode seed — the
    same workloads, the same random numbers — runs alongside with no motion, and the reward is
    minus the *difference* of what the round added to the two costs: what the agent's choices
    changed. Rounds before the first motion then reward exactly 0, and the episode's return is
    minus (cost − the ``noop`` cost of the same episode) — the paired comparison a benchmark makes.
    The final ``info`` carries ``baseline_cost``.

    ## Starting State

    ``reset(seed=s)``: for a family, instance ``s`` (its ``train`` seeds for training, ``test``
    seeds for evaluation: :func:`pvegym.sim.catalog.seeds`) with episode seed ``s``; for a fixed scenario,
    episode seed ``s``. ``reset()`` without a seed draws the next instance (from ``seed_split``'s
    range) and episode seed from the environment's own RNG, deterministically after a seeded reset.
    ``options={"instance_seed": k}`` picks the family instance independently of the seed. The first
    round is simulated before the first observation.

    ## Episode End

    Never terminates (a cluster runs on); truncated after ``episode_seconds / round_s`` decisions
    (default: the scenario's ``duration``), exactly as ``Simulation.run`` — so ``sim_seconds`` of
    the final metrics = decisions × ``round_s``. The final ``info`` holds the metrics (``docs/metrics.md``) as flat keys
    (:data:`~pvegym.sim.metrics.METRIC_KEYS`, for ``Monitor(info_keywords=METRIC_KEYS)``; ``moves``
    is the count), ``move_log`` (the moves of ``simulate --json``) and ``invalid_actions``.

    ## Arguments

    * ``scenario`` — family name, named scenario, ``.toml`` path or :class:`Scenario` (``"small"``).
    * ``episode_seconds`` — episode length in seconds (default: the scenario's duration).
    * ``reward_weights`` — ``{metric: weight}`` over the additive metrics (complete: metrics
      not named weigh 0; default :data:`DEFAULT_REWARD_WEIGHTS`).
    * ``reward_baseline`` — ``"none"`` or ``"noop"`` (the twin above).
    * ``reward_scale`` — the cost is divided by it (> 0), to keep returns in a range a value
      function learns comfortably; it changes no comparison.
    * ``skip_idle_rounds`` — after a step, keep simulating rounds in which no motion is possible
      (pipeline busy) with no motion; the step then covers several rounds (``info["rounds"]``) and
      its reward and the metrics count them all. A policy with per-round state (outcome tracking)
      misses those rounds, so heuristics are compared with it off.
    * ``overrides`` — scenario overrides, dotted key → value (``{"migration.bandwidth":
      "1GiB/s"}``), as an experiment's ``set`` (:func:`pvegym.sim.catalog.resolve`).
    * ``seed_split`` — ``"train"`` or ``"test"``: where unseeded resets draw family instances.
    * ``render_mode`` — ``"ansi"`` (cluster table) or ``"rgb_array"`` (timeline image).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}  # noqa: RUF012
    #: HA guests (view order) the auto-rebalance flags leave to the balancer (None: all), set
    #: per episode
    _movable: NDArray[np.bool_] | None = None

    def __init__(
        self,
        scenario: str | Scenario = "small",
        episode_seconds: float | None = None,
        reward_weights: Mapping[str, float] | None = None,
        reward_baseline: str = "none",
        reward_scale: float = 1.0,
        skip_idle_rounds: bool = False,
        overrides: Mapping[str, Any] | None = None,
        seed_split: str = "train",
        render_mode: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(
                "render_mode", f"{render_mode!r} is not allowed (allowed: ansi, rgb_array)"
            )
        if seed_split not in ("train", "test"):
            raise ConfigError("seed_split", f"{seed_split!r} is not allowed (allowed: train, test)")
        self.render_mode = render_mode
        self.skip_idle_rounds = bool(skip_idle_rounds)
        self.episode_seconds = episode_seconds
        self._overrides = dict(overrides or {})
        # where unseeded resets draw an instance (a fixed scenario draws one too, unused, so that
        # its episode seeds follow the same sequence)
        self._split = TRAIN_SEEDS if seed_split == "train" else TEST_SEEDS
        self._cost = RunningCost(
            DEFAULT_REWARD_WEIGHTS if reward_weights is None else reward_weights
        )
        self.reward_weights = dict(self._cost.weights)
        if reward_baseline not in REWARD_BASELINES:
            raise ConfigError(
                "reward_baseline",
                f"{reward_baseline!r} is not allowed (allowed: {', '.join(REWARD_BASELINES)})",
            )
        self.reward_baseline = reward_baseline
        if not (isinstance(reward_scale, int | float) and 0.0 < float(reward_scale) < math.inf):
            raise ConfigError("reward_scale", f"must be a finite number > 0, not {reward_scale!r}")
        self.reward_scale = float(reward_scale)
        self._inv_scale = 1.0 / self.reward_scale

        self._family: str | None = None
        self._fixed: Scenario | None = None
        if isinstance(scenario, Scenario):
            self._fixed = scenario
        elif catalog.is_family(scenario):
            self._family = scenario
            self._split = catalog.seeds(scenario, "train" if seed_split == "train" else "test")
        else:
            self._fixed = catalog.resolve(
                scenario, 0, self._overrides, set_key="overrides"
            ).scenario
        if self._family is not None:
            self.max_nodes, self.max_guests = catalog.max_sizes(self._family)
        else:
            assert self._fixed is not None
            self.max_nodes = len(self._fixed.nodes)
            self.max_guests = sum(g.ha for g in self._fixed.guests)
        self.max_guests = max(self.max_guests, 1)

        mn, mg = self.max_nodes, self.max_guests
        self.n_actions = 1 + mn * mg
        self.action_space = spaces.Discrete(self.n_actions)
        self._mask = np.zeros(self.n_actions, dtype=bool)
        self._grid = self._mask[1:].reshape(mg, mn)
        self._init_observation()
        self._sim: Simulation | None = None
        self._twin: Simulation | None = None  # the noop twin of reward_baseline="noop"
        self._scenario: Scenario | None = None
        self._instance: int | None = None
        self.episode_seed: int | None = None
        self._last_cost = 0.0
        self._history: list[tuple[NDArray[np.float64], NDArray[np.float64], bool]] = []
        self._limit_warned = False
        self._mask_now: NDArray[np.bool_] | None = None  # action_masks() of this state
        #: ``False``: the caller gave ``make`` the episode's own limit (:meth:`_check_time_limit`)
        self.warn_time_limit = True
        #: ``reset``/``step`` return a fresh observation array; ``False`` returns the environment's
        #: own buffer, valid until its next ``reset``/``step`` — for a caller that copies it at
        #: once anyway (``pvegym.vector``'s batch: one copy of a large observation, not two)
        self.copy_observation = True

    def _init_observation(self) -> None:
        """The observation space and buffer (v0 layout)."""
        mn, mg = self.max_nodes, self.max_guests
        n_gl, n_nf, n_gf = len(GLOBAL_FEATURES), len(NODE_FEATURES), len(GUEST_FEATURES)
        size = n_gl + n_nf * mn + n_gf * mg
        self.observation_space = spaces.Box(0.0, 1.0, shape=(size,), dtype=np.float32)
        self._obs = np.zeros(size, dtype=np.float32)
        self._glob = self._obs[:n_gl]
        self._nodef = self._obs[n_gl : n_gl + n_nf * mn].reshape(n_nf, mn)
        self._guestf = self._obs[n_gl + n_nf * mn :].reshape(n_gf, mg)
        self._nf = {name: self._nodef[i] for i, name in enumerate(NODE_FEATURES)}
        self._gf = {name: self._guestf[i] for i, name in enumerate(GUEST_FEATURES)}

    # ------------------------------------------------------------------ public helpers
    @property
    def sim(self) -> Simulation:
        """The simulation (ground truth: for tools and tests, never for an agent's decisions).
        Reset it through the environment only: ``reset()`` binds the compiled kernels to the
        arrays the simulation builds for the episode."""
        if self._sim is None:
            raise RuntimeError("call reset() first")
        return self._sim

    @property
    def view(self) -> ClusterView:
        """The current round's telemetry view — what a balancer (and the agent) sees."""
        view = self.sim.view
        assert view is not None
        return view

    @property
    def scenario(self) -> Scenario:
        if self._scenario is None:
            raise RuntimeError("call reset() first")
        return self._scenario

    def encode_motion(self, motion: Motion | None) -> int:
        """The action of ``motion`` (0 for none). Raises ``ValueError`` for an unknown guest/node."""
        if motion is None:
            return 0
        g = self._sid_index.get(motion.sid)
        n = self._node_index.get(motion.target)
        if g is None or n is None:
            raise ValueError(f"motion {motion.sid} -> {motion.target} names no HA guest/node here")
        return 1 + g * self.max_nodes + n

    def decode_action(self, action: int) -> Motion | None:
        """The motion of ``action``; ``None`` for 0 and for padding slots (no such guest/node)."""
        a = int(action)
        if a <= 0:
            return None
        g, n = divmod(a - 1, self.max_nodes)
        if g >= self._n_guests or n >= self._n_nodes:
            return None
        view = self.view
        return Motion(view.sids[g], view.node_names[n])

    def action_masks(self) -> NDArray[np.bool_]:
        """Valid actions now (a fresh bool array): exactly the motions ``motion_possible`` accepts.
        Also in every ``reset``/``step`` info as ``info["action_mask"]`` (for frameworks that do
        not call ``action_masks()``): computed once per state, so calling both costs one mask."""
        now = self._mask_now
        if now is None:
            if self.sim.motion_active():
                now = self._noop_mask.copy()
            else:
                self._follow_node_states()
                self._fill_mask(*self._mask_args)  # the real guest × node cells only
                now = self._mask.copy()
            self._mask_now = now
        return now.copy()

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        super().reset(seed=seed)
        rng = self.np_random
        if seed is not None:
            instance, ep_seed = int(seed), int(seed)
        else:
            instance = int(rng.integers(self._split.start, self._split.stop))
            ep_seed = int(rng.integers(0, 2**31 - 1))
        if options and "instance_seed" in options:
            instance = int(options["instance_seed"])
        self.episode_seed = ep_seed
        if self._family is not None:
            if instance != self._instance or self._scenario is None:
                self._scenario = self._make_family(instance)
                self._instance = instance
                self._sim = self._twin = None
        elif self._scenario is None:
            self._scenario = self._fixed
        scn = self.scenario
        if self._sim is None:
            self._sim = Simulation(scn, ep_seed)
        self._sim.reset(ep_seed)
        if self.reward_baseline == "noop":
            if self._twin is None:
                self._twin = Simulation(scn, ep_seed)
            self._twin.reset(ep_seed)
        self._mask_now = None
        self._setup_episode()
        self._on_round()
        self._check_time_limit()
        obs = self._encode()
        info = {"invalid_action": 0, "rounds": 1, "t": self._sim.t}
        return obs, {**info, "action_mask": self.action_masks()}

    def step(
        self, action: int | np.integer[Any]
    ) -> tuple[NDArray[np.float32], SupportsFloat, bool, bool, dict[str, Any]]:
        sim = self._sim
        if sim is None:  # what the ``sim`` property says, without its call
            raise RuntimeError("call reset() first")
        a = int(action)
        if not 0 <= a < self.n_actions:
            raise ValueError(f"action {a} outside Discrete({self.n_actions})")
        if self._decisions >= self._rounds:
            raise RuntimeError("episode is over: call reset()")
        moved = False
        if a:
            g, n = divmod(a - 1, self.max_nodes)
            if g < self._n_guests and n < self._n_nodes and self._option_allows(g, n):
                moved = sim.commit_index(self._ha_list[g], n)  # False: not possible now
            else:
                sim.commit(None)
            invalid = 0 if moved else 1
        else:
            sim.commit(None)
            invalid = 0
        self._decisions += 1
        self._invalid_total += invalid
        rounds = 0
        record = self.render_mode == "rgb_array"
        if record:
            self._record(moved)
        twin = self._twin
        while self._decisions < self._rounds:
            sim.advance()
            sim.receive()
            if twin is not None:
                twin.commit(None)
                twin.advance()
                twin.receive()
            self._on_round()
            rounds += 1
            if not self.skip_idle_rounds or self._any_motion_possible():
                break
            sim.commit(None)
            self._decisions += 1
            if record:
                self._record(False)
        truncated = self._decisions >= self._rounds
        cost = self._cost(sim)
        if twin is not None:
            cost -= self._cost(twin)
        reward = -(cost - self._last_cost) * self._inv_scale
        self._last_cost = cost
        self._mask_now = None
        info: dict[str, Any] = {"invalid_action": invalid, "rounds": rounds, "t": sim.t}
        if truncated:
            if twin is not None:
                info["baseline_cost"] = self._cost(twin)
            result = sim.result()
            info.update(result["metrics"])
            info["move_log"] = result["moves"]
            info["invalid_actions"] = self._invalid_total
        obs = self._encode()
        info["action_mask"] = self.action_masks()
        return obs, reward, False, truncated, info

    def render(self) -> str | NDArray[np.uint8] | None:
        if self.render_mode == "ansi":
            return self._render_ansi()
        if self.render_mode == "rgb_array":
            return self._render_rgb()
        return None

    # ------------------------------------------------------------------ internals
    def _check_time_limit(self) -> None:
        """Warn (once) when ``gymnasium.make``'s ``TimeLimit`` — the registered
        ``max_episode_steps`` unless ``make`` was given another — would end this scenario's
        episodes before the environment does. The environment cannot see the limit ``make`` got,
        so a caller that passed the episode's own length (or ``-1``) sets ``warn_time_limit``
        to ``False``."""
        registered = gymnasium.registry.get(self.spec.id) if self.spec is not None else None
        limit = registered.max_episode_steps if registered is not None else None
        if (
            self.warn_time_limit
            and limit is not None
            and limit < self._rounds
            and not self._limit_warned
        ):
            self._limit_warned = True
            gymnasium.logger.warn(
                f"{self.spec.id if self.spec else ''}'s registered max_episode_steps ({limit}) is "
                f"shorter than this scenario's episodes ({self._rounds} decisions): unless "
                "gymnasium.make got max_episode_steps, its TimeLimit ends them early — pass "
                "max_episode_steps=-1 (the environment truncates at the scenario's end)"
            )

    def _make_family(self, instance: int) -> Scenario:
        assert self._family is not None
        return catalog.resolve(
            self._family, instance, self._overrides, set_key="overrides"
        ).scenario

    def _setup_episode(self) -> None:
        """Per-episode constants: sizes, indices, static features, the cost baseline."""
        sim = self.sim
        view = self.view
        cl = sim.cluster
        scn = self.scenario
        n, g = cl.n_nodes, int(sim.ha_idx.size)
        if n > self.max_nodes or g > self.max_guests:
            raise ConfigError(
                "scenario",
                f"{scn.name} has {n} nodes / {g} HA guests, more than the action space's "
                f"{self.max_nodes} / {self.max_guests}",
            )
        self._n_nodes, self._n_guests = n, g
        self._ha_idx = sim.ha_idx
        self._ha_list: list[int] = sim.ha_idx.tolist()
        self._sid_index = {s: i for i, s in enumerate(view.sids)}
        self._node_index = {s: i for i, s in enumerate(view.node_names)}
        seconds = scn.duration if self.episode_seconds is None else float(self.episode_seconds)
        self._rounds = max(1, round(seconds / sim.round_s))
        self._episode_len_s = self._rounds * sim.round_s
        self._decisions = 0
        self._invalid_total = 0
        self._history = []
        self._disabled = np.array([f in scn.telemetry.disabled for f in TELEMETRY_FIELDS])
        self._movable = rebalance_movable(view.rules, view.sids, view.guest_auto_rebalance)
        # what the mask never changes within an episode: node online, node affinity
        allowed = np.ascontiguousarray(
            sim.node_allowed[self._ha_idx] & cl.node_online[None, :] & self._mask_guests()[:, None]
        )
        # the node states the mask last followed (:meth:`_follow_node_states`)
        self._allowed, self._guest_ok = allowed, self._mask_guests()[:, None]
        self._node_state_version = 0
        self._mask_args: tuple[Any, ...] = (
            self._grid, allowed, self._ha_idx, sim.svc_place, sim.svc_started,
            sim.neg_ptr, sim.neg_idx,
        )  # fmt: skip
        self._fill_mask: Any = entry_point(fill_mask, *self._mask_args)
        # fill_mask writes only the real cells: action 0 and the padding are set once here
        self._mask[:] = False
        self._mask[0] = True
        self._noop_mask = self._mask.copy()
        # baseline zero: the first step's reward also carries the first round (simulated by
        # reset, before any decision), so the episode's rewards sum to minus its final cost
        self._last_cost = 0.0
        self._setup_observation()

    def _option_allows(self, g: int, n: int) -> bool:
        """Whether the environment's own mask options (none in v0) and the guest's
        ``auto-rebalance`` flag leave guest ``g`` → node ``n`` in: what they mask is a counted
        no-op like what the HA manager refuses."""
        return self._movable is None or bool(self._movable[g])

    def _mask_guests(self) -> NDArray[np.bool_]:
        """HA guests (view order) the mask may offer at all this episode: all but those the
        ``auto-rebalance`` flag keeps from the balancer (:func:`rebalance_movable`)."""
        if self._movable is None:
            return np.ones(self._n_guests, dtype=bool)
        return self._movable.copy()

    def _setup_observation(self) -> None:
        """The observation's static features and its kernel's bound arguments (v0 layout)."""
        sim, view, cl = self.sim, self.view, self.sim.cluster
        n, g = self._n_nodes, self._n_guests
        self._obs[:] = 0.0
        nf, gf = self._nf, self._gf
        nf["present"][:n] = 1.0
        nf["maxcpu"][:n] = view.node_maxcpu / CORES_SCALE
        nf["maxmem"][:n] = view.node_maxmem / NODE_MEM_SCALE
        gf["present"][:g] = 1.0
        cap = guest_cpu_cap(view)  # a guest without a CPU limit: its node's CPUs at the start
        gf["maxcpu"][:g] = cap / GUEST_CPU_SCALE
        gf["maxmem"][:g] = view.guest_maxmem / GUEST_MEM_SCALE
        gf["migratable"][:g] = view.guest_migratable
        self._glob[GLOBAL_FEATURES.index("nodes_frac")] = n / self.max_nodes
        self._glob[GLOBAL_FEATURES.index("guests_frac")] = g / self.max_guests
        self._inv_node = np.stack([1.0 / view.node_maxcpu, 1.0 / view.node_maxmem])
        self._inv_guest = np.stack([1.0 / cap, 1.0 / view.guest_maxmem])
        # the kernels' arguments bound for the episode: the simulation updates these arrays in
        # place, and binding saves a step dozens of attribute lookups and slices
        self._enc_args = (
            self._obs, len(GLOBAL_FEATURES), len(NODE_FEATURES), self._disabled,
            sim.node_usable, sim.telemetry.node_rows, self._inv_node,
            self._ha_idx, sim.svc_place, sim.svc_started,
            cl.running, sim.telemetry.guest_rows, self._inv_guest,
            self.max_nodes, self.max_guests,
        )  # fmt: skip
        self._encode_kernel = entry_point(encode, *self._enc_args, 0.0, False, False, False)

    def _on_round(self) -> None:
        """After each simulated round's ``receive`` (skipped rounds included): a subclass that
        remembers what it saw round by round updates it here."""

    def _any_motion_possible(self) -> bool:
        """Whether any motion is valid now (writes the mask buffer's guest × node grid)."""
        if self.sim.motion_active():
            return False
        self._follow_node_states()
        return bool(self._fill_mask(*self._mask_args))

    def _follow_node_states(self) -> None:
        """The mask's targets follow the HA manager's node states (``ha_stack = "full"``: a
        node in maintenance, unknown, being fenced or off is no target, as ``Manager.pm``
        ignores a motion to a node that is not ``online``, and node affinity picks among the
        ``online`` nodes); the model stack never changes them."""
        sim = self.sim
        if sim.node_state_version != self._node_state_version:
            self._node_state_version = sim.node_state_version
            allowed = sim.node_allowed[self._ha_idx] & sim.node_usable[None, :] & self._guest_ok
            self._allowed[:] = allowed

    def _encode(self) -> NDArray[np.float32]:
        """Fill the preallocated observation from this round's telemetry; return a copy."""
        sim = self._sim  # set: reset() encodes the first observation
        assert sim is not None
        ok, failed = sim.result_flags()
        self._encode_kernel(
            *self._enc_args, sim.t / self._episode_len_s, sim.motion_active(), ok, failed
        )
        return self._obs.copy() if self.copy_observation else self._obs

    # ------------------------------------------------------------------ rendering
    def _record(self, moved: bool) -> None:
        cl = self.sim.cluster
        cpu_some, _, _ = cl.node_avg10()
        self._history.append((cl.node_cpu / cl.node_maxcpu, cpu_some / 100.0, moved))

    def _render_ansi(self) -> str:
        view = self.view
        lines = [
            f"t={view.t:.0f}s  decisions={self._decisions}/{self._rounds}  "
            f"pipeline={'busy' if view.motion_active else 'idle'}",
            # what a balancer sees: telemetry point samples; PSI is "some" avg10 in percent
            f"{'node':<10} {'on':>2} {'cpu cores':>13} {'mem GiB':>15} {'psi cpu':>7} "
            f"{'psi mem':>7} {'guests':>6}",
            f"{'':<10} {'':>2} {'used/total':>13} {'used/total':>15} {'some %':>7} "
            f"{'some %':>7} {'':>6}",
        ]
        counts = np.bincount(view.guest_node, minlength=len(view.node_names))
        for j, name in enumerate(view.node_names):
            lines.append(
                f"{name:<10} {'y' if view.node_online[j] else 'n':>2} "
                f"{view.node_cpu[j]:6.1f}/{view.node_maxcpu[j]:<6.0f} "
                f"{view.node_mem[j] / GiB:7.1f}/{view.node_maxmem[j] / GiB:<7.0f} "
                f"{view.node_cpu_some[j]:7.1f} {view.node_mem_some[j]:7.1f} {counts[j]:>6}"
            )
        for i in np.flatnonzero(view.guest_target >= 0):
            lines.append(
                f"  moving {view.sids[i]}: {view.node_names[view.guest_node[i]]} -> "
                f"{view.node_names[view.guest_target[i]]} ({view.guest_state[i]})"
            )
        for r in view.results:
            lines.append(
                f"  result {r.sid}: {r.source} -> {r.target} "
                + ("ok" if r.ok else f"failed ({r.reason})")
            )
        return "\n".join(lines) + "\n"

    def _render_rgb(self) -> NDArray[np.uint8]:
        """Timeline: one band per node (top: cpu use, bottom: cpu some avg10), 2 px per round,
        white columns where a motion was issued; the last 400 rounds."""
        n = self._n_nodes
        hist = self._history[-400:] or [(np.zeros(n), np.zeros(n), False)]
        band = 12
        img = np.zeros((n * band, 2 * len(hist), 3), dtype=np.uint8)
        util = np.clip(np.array([h[0] for h in hist]), 0.0, 1.0)  # rounds × nodes
        some = np.clip(np.array([h[1] for h in hist]), 0.0, 1.0)
        for j in range(n):
            top = slice(j * band, j * band + band // 2 - 1)
            bot = slice(j * band + band // 2 - 1, j * band + band - 2)
            u = np.repeat(util[:, j], 2)
            s = np.repeat(some[:, j], 2)
            img[top, :, 0] = (255 * u).astype(np.uint8)
            img[top, :, 1] = (255 * (1.0 - u)).astype(np.uint8)
            img[bot, :, 0] = (255 * s).astype(np.uint8)
            img[bot, :, 2] = (80 * (1.0 - s)).astype(np.uint8)
        for k, h in enumerate(hist):
            if h[2]:
                img[:, 2 * k, :] = 255
        return img


__all__ = [
    "DEFAULT_REWARD_WEIGHTS",
    "GLOBAL_FEATURES",
    "GUEST_FEATURES",
    "METRIC_KEYS",
    "NODE_FEATURES",
    "REWARD_BASELINES",
    "ClusterEnv",
]
