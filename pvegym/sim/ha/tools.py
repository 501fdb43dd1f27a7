"""The parts of ``PVE::HA::Tools`` the HA stack uses (pve-ha-manager 5.2.0, ``src/PVE/HA/Tools.pm``).

Exit codes of the resource agents, the service counters the CRM and the LRM decide with, the
resource-id check and the version comparison of the HA-groups migration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Return codes used in the HA environment, mainly by the resource agents (Tools.pm L12–22).
SUCCESS = 0  # action finished as expected
ERROR = 1  # action was erroneous
ETRY_AGAIN = 2  # action was erroneous and needs to be repeated
EWRONG_NODE = 3  # needs to fixup the service location
EUNKNOWN_SERVICE_TYPE = 4  # no plugin for this type service found
EUNKNOWN_COMMAND = 5
EINVALID_PARAMETER = 6
EUNKNOWN_SERVICE = 7  # service not found
IGNORED = 8  # action was ignored for some good reason

_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.|-)(\d+)(?:~(\d+))?")


def count_fenced_services(ss: Mapping[str, Any], node: str) -> int:
    """Services on ``node`` in state ``fence`` (Tools.pm ``count_fenced_services``)."""
    count = 0
    for sd in ss.values():
        # the state first (rarely 'fence'): the same count as upstream's node-then-state test
        if sd.get("state") != "fence":
            continue
        sd_node = sd.get("node")
        if sd_node and sd_node == node:
            count += 1
    return count


#: CRM states that do not make a service active on its node (Tools.pm ``count_active_services``).
_INACTIVE_STATES = frozenset({"stopped", "freeze", "error", "request_start"})


def count_active_services(ss: Mapping[str, Any], node: str) -> int:
    """Services the LRM of ``node`` is responsible for: on the node or migrating to it, in a state
    other than stopped, freeze, error and request_start (Tools.pm L223–246)."""
    count = 0
    for sd in ss.values():
        target = sd.get("target")
        on_node = bool(sd.get("node")) and sd["node"] == node
        if not on_node and (not target or target != node):
            continue
        state = sd.get("state")
        if state is None or state in _INACTIVE_STATES:
            continue
        count += 1
    return count


def has_min_version(version: str, min_version: str) -> bool:
    """``has_min_version`` (Tools.pm L283–309): ``major.minor.patch[~rev]`` comparison.

    Perl compares the captured parts numerically; a version that does not parse compares as 0
    (an undefined value in a numeric comparison).
    """

    def parts(v: str) -> tuple[int, int, int, int | None]:
        m = _VERSION.match(v)
        if not m:
            return (0, 0, 0, None)
        rev = m.group(4)
        return (
            int(m.group(1)),
            int(m.group(2)),
            int(m.group(3)),
            None if rev is None else int(rev),
        )

    major, minor, patch, rev = parts(version)
    min_major, min_minor, min_patch, min_rev = parts(min_version)
    if major < min_major:
        return False
    if major == min_major and minor < min_minor:
        return False
    if major == min_major and minor == min_minor and patch < min_patch:
        return False
    min_rev_v = 0 if min_rev is None else min_rev
    return not (
        major == min_major
        and minor == min_minor
        and patch == min_patch
        and rev is not None
        and rev < min_rev_v
    )


#: key of the manager status that carries the Manager's serial where the environment supports the
#: steady state (:meth:`~pvegym.sim.ha.env.HAEnv.quiescence_token`): a new value whenever the
#: service, node or manager state may have changed; the LRMs memoize on it
QUIET_SERIAL_KEY = "pvegym-serial"


#: the scalar types of JSON-like data: :func:`frozen` returns them as they are (callers that
#: freeze many values test it before calling)
JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


def frozen(value: Any, skip: str | None = None) -> Any:
    """A deep, comparable (hashable) copy of JSON-like data: a dict becomes the tuple of its
    ``(key, frozen value)`` pairs in key order, a list or tuple the tuple of its frozen items.
    ``skip``: a key of the top-level dict left out (the Manager's state snapshot freezes each
    service without its ``uid`` this way: no filtered copy of every service).

    The steady-state checks freeze the service status twice a full round, so scalars are
    returned first and a dict's keys alone are sorted (they are unique: the order of the pairs
    is the order of the keys); the key test only runs when there is a key to skip."""
    if type(value) in JSON_SCALARS:
        return value
    if isinstance(value, dict):
        if skip is None:
            return tuple(
                [
                    (k, v if type(v) in JSON_SCALARS else frozen(v))
                    for k in sorted(value)
                    for v in (value[k],)
                ]
            )
        return tuple(
            [
                (k, v if type(v) in JSON_SCALARS else frozen(v))
                for k in sorted(value)
                if k != skip
                for v in (value[k],)
            ]
        )
    if isinstance(value, list | tuple):
        return tuple([v if type(v) in JSON_SCALARS else frozen(v) for v in value])
    return value
    if isinstance(value, dict):
        return tuple(
            [
                (k, v if type(v) in JSON_SCALARS else frozen(v))
                for k in sorted(value)
                for v in (value[k],)
            ]
        )
    if isinstance(value, list | tuple):
        return tuple([v if type(v) in JSON_SCALARS else frozen(v) for v in value])
    return value
