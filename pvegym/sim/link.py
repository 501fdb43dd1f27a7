"""A live migration's stream over a link that is cut: what TCP does while no segment gets through.

qemu-server migrates a running VM inside the cluster through an SSH tunnel: QEMU writes its stream
into a local unix socket that ``ssh -L`` forwards to the target (``QemuMigrate.pm``
``phase2_start_local_cluster``/``start_remote_tunnel``, ``PVE/Tunnel.pm`` ``fork_ssh_tunnel``).
The ssh command carries no ``ServerAliveInterval`` and no ``ConnectTimeout``
(``PVE/SSHInfo.pm`` ``ssh_info_to_ssh_opts``: ``BatchMode``, ``HostKeyAlias``, the known-hosts
files; ``Tunnel.pm``: ``ExitOnForwardFailure``), and qemu-server's ``query-migrate`` loop has no
timeout of its own (``QemuMigrate.pm`` ``phase2``). So when the target loses its power or either
node its network, no RST arrives and nothing notices but the kernel's TCP of the ssh connection:

* the stream stalls — QEMU's migration thread blocks in its write, no byte moves, the guest runs
  on the source (auto-converge's cpu throttle, set by the migration, stays in force);
* TCP retransmits the oldest unacknowledged segment with exponential backoff from ``TCP_RTO_MIN``
  (200 ms) doubling up to ``TCP_RTO_MAX`` (120 s) (``include/net/tcp.h``); SO_KEEPALIVE (ssh's
  ``TCPKeepAlive``) does not fire while data is unacknowledged;
* after ``tcp_retries2`` = 15 retransmissions it gives up at the 16th RTO: "The default value of 15
  yields a hypothetical timeout of 924.6 seconds" (Linux ``Documentation/networking/ip-sysctl.rst``,
  ``tcp_retries2``; "a lower bound for the effective timeout": the kernel gives up at the first
  RTO past it, and a LAN's RTO starts at ``TCP_RTO_MIN``) — :data:`TCP_TIMEOUT_S`. ssh exits,
  QEMU's next write to the forwarded socket fails (``io/channel-socket.c``
  ``qio_channel_socket_writev``: "Unable to write to socket", EPIPE), the precopy migration fails
  with that error (``migration/migration.c`` ``migration_detect_error``) and qemu-server logs it
  and cancels (:data:`STREAM_FAILED`).
* A link back before then carries the stream again from the first retransmission after its return
  (:func:`next_retransmission`); a target that rebooted meanwhile answers that retransmission with
  an RST (its kernel has no such connection): the migration fails then, with the same error.
"""

from __future__ import annotations

import bisect
from typing import Final

#: ``include/net/tcp.h``: ``TCP_RTO_MIN`` = HZ/5 and ``TCP_RTO_MAX`` = 120 HZ, in ms
TCP_RTO_MIN_MS: Final = 200
TCP_RTO_MAX_MS: Final = 120_000
#: ``Documentation/networking/ip-sysctl.rst``: ``tcp_retries2``, default 15
TCP_RETRIES2: Final = 15


def retransmission_times(retries: int = TCP_RETRIES2) -> tuple[float, ...]:
    """Seconds after the first lost segment at which TCP retransmits it (the ``retries``
    retransmissions), then the time it gives up (the ``retries + 1``-th RTO), for the
    hypothetical connection of ``ip-sysctl.rst``: initial RTO ``TCP_RTO_MIN``, doubling up to
    ``TCP_RTO_MAX``. Summed in whole ms so that the default's end is exactly 924.6 s."""
    out, total_ms = [], 0
    for i in range(retries + 1):
        total_ms += min(TCP_RTO_MIN_MS << i, TCP_RTO_MAX_MS)
        out.append(total_ms / 1000.0)
    return tuple(out)


#: the retransmissions, then the timeout, of the default ``tcp_retries2`` (s after the cut)
RETRANSMISSIONS_S: Final = retransmission_times()
#: how long a stalled migration stream lives: ``tcp_retries2`` = 15 → 924.6 s (``ip-sysctl.rst``)
TCP_TIMEOUT_S: Final = RETRANSMISSIONS_S[-1]

#: what qemu-server logs when QEMU reports the failed migration (``QemuMigrate.pm`` ``phase2``:
#: "migration status error: $status - $error-desc"), QEMU's error-desc being the failed write
STREAM_FAILED: Final = "migration status error: failed - Unable to write to socket: Broken pipe"
#: what qemu-server's ``prepare`` reports when the target does not answer its ssh test
#: (``QemuMigrate.pm`` ``prepare``: ``ssh … /bin/true``)
NO_SSH: Final = "Can't connect to destination address using public key"
#: qemu-server's log after a phase-2 error (``QemuMigrate.pm`` ``phase2_cleanup``)
PHASE2_CLEANUP: Final = ("aborting phase 2 - cleanup resources", "migrate_cancel")


def next_retransmission(stalled_s: float) -> float:
    """The first retransmission (s after the cut) at or after ``stalled_s`` s into the stall —
    when a link back at ``stalled_s`` carries the stream again — or :data:`TCP_TIMEOUT_S`."""
    i = bisect.bisect_left(RETRANSMISSIONS_S, stalled_s)
    return RETRANSMISSIONS_S[min(i, len(RETRANSMISSIONS_S) - 1)]
