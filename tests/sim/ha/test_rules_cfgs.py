"""Every upstream rule-file case (``rules_cfgs/X.cfg``) gives exactly upstream's ``X.cfg.expect``.

The cases and their expected output are pve-ha-manager 5.2.0's ``src/test/rules_cfgs/``; upstream's
``test_rules_config.pl`` runs them from ``src/test`` with the nodes ``node1``–``node3``, so the file
name it parses is ``rules_cfgs/X.cfg``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pvegym.sim.ha.rules_check import check_cfg

CASES_DIR = Path(__file__).resolve().parents[2] / "data" / "upstream-tests" / "rules_cfgs"
CASES = sorted(CASES_DIR.glob("*.cfg"))


def test_all_upstream_cases_are_present() -> None:
    # pve-ha-manager 5.2.0 ships 12 rule-file cases, each with its expected output
    assert len(CASES) == 12
    assert all(case.with_name(case.name + ".expect").is_file() for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_rules_cfg_gives_its_expect(case: Path) -> None:
    warnings: list[str] = []
    out = check_cfg(f"rules_cfgs/{case.name}", case.read_bytes(), warn=warnings.append)
    assert out.decode("latin-1") == case.with_name(case.name + ".expect").read_bytes().decode(
        "latin-1"
    )
    assert warnings == []  # upstream's cases parse cleanly
