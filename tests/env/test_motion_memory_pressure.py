"""The motion memory's pressure counter: consecutive rounds at or above the gate, reset to 0 by a
round below it, by an offline node and by missing telemetry (NaN)."""

import numpy as np

from pvegym.env.memory import MotionMemory
from pvegym.env.observation_layout import MemoryOptions


def test_pressure_rounds_count_consecutive_rounds_at_or_above_the_gate() -> None:
    opts = MemoryOptions()
    gate = opts.pressure_pct
    mem = MotionMemory(2, 5, opts)
    online = np.array([True, True, True, False, True])
    nan = np.nan
    rounds = [
        # node: 0 cpu at gate, 1 mem above, 2 below, 3 offline and hot, 4 NaN then hot
        (np.array([gate, 0.0, gate - 1e-9, 99.0, nan]), np.array([0.0, gate + 1, 0.0, 99.0, nan])),
        (np.array([gate, 0.0, 0.0, 99.0, gate]), np.array([0.0, gate + 1, 0.0, 99.0, nan])),
        (np.array([0.0, 0.0, 0.0, 99.0, gate]), np.array([0.0, gate, 0.0, 99.0, 0.0])),
    ]
    seen = []
    for cpu, memory in rounds:
        mem.observe_pressure(online, cpu, memory)
        seen.append(mem.pressure_rounds.copy())
    np.testing.assert_array_equal(
        np.stack(seen), [[1, 1, 0, 0, 0], [2, 2, 0, 0, 1], [0, 3, 0, 0, 2]]
    )
    mem.reset()
    assert not mem.pressure_rounds.any()
