"""The model's two sides of an HA stack, as typed interfaces.

* :class:`HAControl` — what :class:`~pvegym.sim.simulation.Simulation` drives each round: the
  CRM round (``Manager.pm`` ``manage``), the LRMs' ticks, the scenario's events and the
  balancer's answer. Three implementations: the port of pve-ha-manager
  (:class:`~pvegym.sim.ha_stack.HAStack`, ``ha_stack = "full"``), the compiled HA engine's CRM
  round with the port's LRMs (:class:`~pvegym.sim.engine_stack.EngineStack`, ``"engine"``) and
  the model's own smaller CRM round (:class:`~pvegym.sim.model_crm.ModelCRM`,
  ``ha_stack = "model"``, to be deleted). ``Simulation`` keeps one shortcut of the
  model's: a lone guest's possible motion starts its job at once (``commit_index``).
* :class:`SimulationPort` — what an HA stack reads and changes of the simulation: the cluster's
  hardware (guests start and stop, nodes lose power, stopped guests move), the service table it
  writes back, the balancer's move records and the episode's log. ``Simulation`` implements it;
  an HA stack never reaches into the simulation's private state.

Neither module imports the other: both depend on this one.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from pvegym.sim.cluster import ClusterState
from pvegym.sim.metrics import Metrics
from pvegym.sim.motions import Job
from pvegym.sim.move_ledger import MoveLedger, MoveRecordArgs
from pvegym.sim.scenario import EventSpec, Scenario
from pvegym.sim.telemetry_view import TelemetryView
from pvegym.sim.view import ClusterView, Motion


class HAControl(Protocol):
    """An HA stack the simulation drives: one CRM round per :meth:`round`, the LRMs' ticks in
    the physics of each round (:meth:`lrm_ticks`)."""

    def round(self) -> None:
        """The CRM round at the simulation's time (the service state machine, the commands,
        the balancer's call), the service table written back to the simulation."""

    def lrm_ticks(self, t0: float, t1: float) -> None:
        """Every LRM's tick in the round ``(t0, t1]`` (s), once the round's motions have run."""

    def event(self, ev: EventSpec) -> None:
        """A scenario event due at the round time (hardware, operator commands)."""

    def queue_command(self, g: int, target: int) -> None:
        """A manual ``migrate`` of guest ``g`` to node index ``target``, for the next round."""

    def answer(self, g: int, target: int, move: MoveRecordArgs) -> None:
        """This round's balancer answer: guest ``g`` to node index ``target``; ``move`` counts
        once the CRM took it."""

    def describe(self, motion: Motion) -> None:
        """The answer as the policy's own :class:`Motion` (its imbalances, for the log)."""

    def down_count(self) -> int:
        """HA services requested started that are not up now."""

    def maintenance_pending(self) -> bool:
        """The HA manager's maintenance moves are pending (a node in or entering maintenance
        still holds an HA service that is not stopped)."""

    def link_up(self, a: int, b: int) -> bool:
        """Nodes ``a`` and ``b`` (indices) reach each other (a migration stream flows)."""


class SimulationPort(Protocol):
    """The simulation as an HA stack sees it (implemented by ``Simulation``)."""

    scenario: Scenario
    seed: int
    t: float
    cluster: ClusterState
    metrics: Metrics
    views: TelemetryView
    moves: MoveLedger
    ha_idx: NDArray[np.int64]
    ha_sids: tuple[str, ...]
    #: the service table the stack writes back after each CRM round, by cluster guest
    svc_state: list[str]
    svc_started: NDArray[np.bool_]
    svc_node: NDArray[np.int64]
    svc_target: NDArray[np.int64]
    #: a motion is queued or running in the stack, or no master wrote the services' status yet
    ha_busy: bool

    @property
    def jobs(self) -> list[Job]: ...
    @property
    def view(self) -> ClusterView: ...
    @property
    def built_view(self) -> ClusterView | None: ...
    @property
    def ha_guests(self) -> list[int]: ...
    @property
    def killed(self) -> AbstractSet[int]: ...

    def log_line(self, t: float, line: str) -> None: ...
    def states_changed(self) -> None: ...
    def clear_results(self) -> None: ...
    def set_running(self, g: int, on: bool) -> None: ...
    def power_off_node(self, n: int, t: float) -> None: ...
    def place_stopped_guest(self, g: int, node: str, t: float) -> None: ...
    def set_node_states(self, states: tuple[str, ...]) -> None: ...
    def run_new_motion(self, t0: float, t1: float) -> None: ...
    def move_taken(self, g: int, move: MoveRecordArgs) -> None: ...
