"""Build the committed export fixtures, field by field from the Proxmox VE API schema.

No public export of a real cluster with these API answers exists under a licence we can use, so
the two clusters here are synthetic (see ``README.md``): their *shapes* follow the sources cited
below exactly, their *values* come from the workload described in each builder, generated at the
RRD's base resolution (one 60 s PDP) and consolidated the way RRDtool consolidates (xff 0.5).
The files are what ``scripts/pve-export.sh`` writes (after its filter: no secrets). Rebuild with
``python tests/data/pve-exports/build_fixtures.py`` (deterministic: same files, byte for byte).

Sources (read at the snapshots named in ``docs/model.md``, *Upstream sources*):

* RRD data sources and RRAs: pve-cluster ``src/pmxcfs/status.c`` (``rrd_def_node`` /
  ``rrd_def_vm`` for PVE 8's ``pve2-*``; ``rrd_def_node_pve9_0`` / ``rrd_def_vm_pve9_0``).
* rows per timeframe and resolution: pve-cluster ``src/PVE/RRD.pm`` ``create_rrd_data``.
* what pvestatd writes into them: pve-manager ``PVE/Service/pvestatd.pm`` (``update_node_status``,
  ``update_qemu_status``: a stopped guest's cpu/mem are undef).
* ``/cluster/resources``: pve-manager ``PVE/API2/Cluster.pm`` (``resources`` return schema).
* ``/nodes/{node}/status``: pve-manager ``PVE/API2/Nodes.pm`` (``status``).
* HA: pve-ha-manager ``src/PVE/API2/HA/{Resources,Rules,Groups,Status}.pm``.
* ``/cluster/options``: pve-cluster ``src/PVE/DataCenterConfig.pm`` (``crs`` format).
* guest configs: qemu-server's and pve-container's config schemas (keys as ``qm config`` and
  ``pct config`` print them).
"""

from __future__ import annotations

import calendar
import gzip
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
GiB = 2**30
MiB = 2**20
EXPORT_TIME = calendar.timegm((2026, 11, 20, 12, 0, 37, 0, 0, 0))  # Fri 2026-11-20 12:00:37 UTC
CTIME = 60 * (EXPORT_TIME // 60)  # 12:00:00: every timeframe's last row ends here
DAY = 86400

NODE_FIELDS_PVE2 = (
    "loadavg",
    "maxcpu",
    "cpu",
    "iowait",
    "memtotal",
    "memused",
    "swaptotal",
    "swapused",
    "roottotal",
    "rootused",
    "netin",
    "netout",
)
NODE_FIELDS_PVE9 = (
    *NODE_FIELDS_PVE2,
    "memavailable",
    "arcsize",
    "pressurecpusome",
    "pressureiosome",
    "pressureiofull",
    "pressurememorysome",
    "pressurememoryfull",
)
VM_FIELDS_PVE2 = (
    "maxcpu",
    "cpu",
    "maxmem",
    "mem",
    "maxdisk",
    "disk",
    "netin",
    "netout",
    "diskread",
    "diskwrite",
)
VM_FIELDS_PVE9 = (
    *VM_FIELDS_PVE2,
    "memhost",
    "pressurecpusome",
    "pressurecpufull",
    "pressureiosome",
    "pressureiofull",
    "pressurememorysome",
    "pressurememoryfull",
)
#: timeframe -> (resolution s, rows), create_rrd_data's $setup_pve2 / $setup — stated again here,
#: not imported from pvegym.pve_export.rrd: the fixtures check the reader, not the reader itself.
#: PVE 7 and 8 (pve-cluster before 1a483ba, PVE 9's "adapt to new RRD format") answer the hour
#: with 70 rows like every other timeframe; PVE 9 reading a pve2 file answers 60.
RESOLUTION = {
    "pve2": {"hour": (60, 70), "day": (1800, 70), "week": (10800, 70)},
    "pve9": {"hour": (60, 60), "day": (60, 1440), "week": (1800, 336)},
}


#: installed versions per fixture (``pveversion -v``'s packages that decide the crs units): PVE
#: 9.2's pve-manager needs libpve-cluster-perl ≥ 9.1.5 and pve-ha-manager ≥ 5.2.3 (its d/control)
PVE9_PACKAGES = {"libpve-cluster-perl": "9.1.6", "pve-cluster": "9.1.6", "pve-ha-manager": "5.2.5",
                 "pve-manager": "9.2.5"}  # fmt: skip
PVE8_PACKAGES = {"libpve-cluster-perl": "8.1.0", "pve-cluster": "8.1.0", "pve-ha-manager": "4.0.7",
                 "pve-manager": "8.4.1"}  # fmt: skip
PVE7_PACKAGES = {"libpve-cluster-perl": "7.3-3", "pve-cluster": "7.3-3", "pve-ha-manager": "3.6.1",
                 "pve-manager": "7.4-17"}  # fmt: skip


# ---------------------------------------------------------------------------------- time series
class Clock:
    """The PDP grid: minute ``m`` covers ``(T_m − 60, T_m]`` and ends at ``T_m``."""

    def __init__(self, minutes: int) -> None:
        self.n = minutes
        self.t = CTIME - 60 * np.arange(minutes - 1, -1, -1, dtype=np.int64)
        self.tod_h = ((self.t - 30) % DAY) / 3600.0  # hour of day (UTC) at the PDP's middle

    def at(self, day: int, hour: float) -> int:
        """Unix time of ``hour`` (UTC) on day ``day``: 0 = the calendar day a week before the
        export's (Fri 13), 7 = the export's (Fri 20)."""
        return int(CTIME - 7 * DAY + day * DAY - (CTIME % DAY) + hour * 3600)

    def between(self, t0: float, t1: float) -> np.ndarray:
        return (self.t > t0) & (self.t <= t1)


def ou(rng: np.random.Generator, n: int, sigma: float, tau_min: float) -> np.ndarray:
    """Stationary AR(1) noise with std ``sigma`` and correlation time ``tau_min`` minutes."""
    phi = np.exp(-1.0 / tau_min)
    x = np.empty(n)
    x[0] = rng.normal(0.0, sigma)
    e = rng.normal(0.0, sigma * np.sqrt(1 - phi * phi), n)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return x


def daily(clock: Clock, peak_h: float, width_h: float = 4.0) -> np.ndarray:
    """A working-day bump in 0..1 peaking at ``peak_h`` UTC."""
    d = (clock.tod_h - peak_h + 12) % 24 - 12
    return np.exp(-0.5 * (d / width_h) ** 2)


def consolidate(pdp: np.ndarray, per_row: int, fn: str) -> np.ndarray:
    """RRDtool's consolidation of ``per_row`` PDPs into one row (AVERAGE or MAX, xff 0.5)."""
    rows = pdp.reshape(-1, per_row)
    known = np.isfinite(rows).sum(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: NaN, dropped below
        val = np.nanmean(rows, axis=1) if fn == "AVERAGE" else np.nanmax(rows, axis=1)
    return np.where(known >= 0.5 * per_row, val, np.nan)


def _num(x: float) -> float | int:
    """How the fixture prints a value: 5 significant digits (RRD averages are long floats; the
    shorter form keeps the files small), integral values as integers."""
    if float(x).is_integer() and abs(x) < 2**53:
        return int(x)
    return float(f"{x:.5g}")


def rrd_rows(fields: dict[str, np.ndarray], fmt: str, tf: str, cf: str) -> list[dict[str, Any]]:
    """The ``rrddata`` answer of ``timeframe=tf``, ``cf`` from PDP arrays (NaN = unknown)."""
    step, count = RESOLUTION[fmt][tf]
    per = step // 60
    out: list[dict[str, Any]] = []
    cons = {}
    for name, pdp in fields.items():
        tail = pdp[-count * per :]
        cons[name] = consolidate(tail, per, cf) if per > 1 else tail
    times = CTIME - step * np.arange(count - 1, -1, -1)
    for k, t in enumerate(times.tolist()):
        row: dict[str, Any] = {"time": int(t)}
        for name in sorted(cons):
            v = cons[name][k]
            if np.isfinite(v):
                row[name] = _num(float(v))
        out.append(row)
    return out


# ---------------------------------------------------------------------------------- entities
class Guest:
    def __init__(
        self,
        vmid: int,
        kind: str,
        name: str,
        cores: int,
        mem_mib: int,
        config: dict[str, Any],
        ha: dict[str, Any] | None,
        disk_gib: float = 32,
    ) -> None:
        self.vmid, self.kind, self.name = vmid, kind, name
        self.cores, self.maxmem = cores, mem_mib * MiB
        self.config, self.ha, self.maxdisk = config, ha, disk_gib * GiB
        self.cpu: np.ndarray | None = None  # cores, NaN = not running
        self.memhost: np.ndarray | None = None
        self.mem: np.ndarray | None = None
        self.node: np.ndarray | None = None  # node index per PDP
        self.created: int | None = None  # unix s: no RRD data at all before (it did not exist)
        self.listed_on: int | None = None  # the node the API lists it on, if not where it ran

    @property
    def sid(self) -> str:
        return f"{'vm' if self.kind == 'qemu' else 'ct'}:{self.vmid}"


class Cluster:
    def __init__(self, name: str, fmt: str, version: str, minutes: int, seed: int,
                 packages: dict[str, str]) -> None:  # fmt: skip
        self.name, self.fmt, self.version = name, fmt, version
        self.packages = packages  # installed versions (GET /nodes/<node>/apt/versions)
        self.clock = Clock(minutes)
        self.rng = np.random.default_rng(seed)
        self.nodes: list[dict[str, Any]] = []
        self.guests: list[Guest] = []
        self.tasks: list[dict[str, Any]] = []
        self.gaps: list[tuple[int, int, int]] = []  # (node index, t0, t1): pvestatd down

    def node(self, name: str, cpus: int, mem_gib: int, model: str, host_cpu: np.ndarray,
             host_mem: np.ndarray, arc: np.ndarray | None, status: str = "online") -> None:  # fmt: skip
        self.nodes.append(
            {
                "name": name,
                "cpus": cpus,
                "memtotal": mem_gib * GiB,
                "model": model,
                "host_cpu": host_cpu,
                "host_mem": host_mem,
                "arc": arc,
                "status": status,
            }
        )

    def index(self, node: str) -> int:
        return [n["name"] for n in self.nodes].index(node)

    # the synthetic PSI of the fixture: *not* pvegym's model (see README.md)
    @staticmethod
    def cpu_psi(rho: np.ndarray) -> np.ndarray:
        return 100.0 * (0.05 * rho + 0.6 * rho**4)

    def write(self, root: Path, options: dict[str, Any], rules: list[dict[str, Any]] | None,
              groups: list[dict[str, Any]] | None, manager_status: dict[str, Any],
              storages: list[tuple[str, str, bool]], pci: list[dict[str, Any]] | None) -> None:  # fmt: skip
        out = root / self.name
        if out.exists():
            shutil.rmtree(out)
        clock, fmt = self.clock, self.fmt
        n_nodes = len(self.nodes)
        gap = np.zeros((n_nodes, clock.n), dtype=bool)
        for j, t0, t1 in self.gaps:
            gap[j] |= clock.between(t0, t1)
        # node totals from their guests (placement per PDP)
        demand = np.zeros((n_nodes, clock.n))
        used = np.zeros((n_nodes, clock.n))
        for g in self.guests:
            assert g.cpu is not None and g.memhost is not None and g.node is not None
            for j in range(n_nodes):
                here = (g.node == j) & np.isfinite(g.cpu)
                demand[j] += np.where(here, g.cpu, 0.0)
                used[j] += np.where(here, g.memhost, 0.0)
        resources: list[dict[str, Any]] = []
        for j, nd in enumerate(self.nodes):
            cores = np.minimum(nd["host_cpu"] + demand[j], nd["cpus"])
            rho = cores / nd["cpus"]
            memused = nd["host_mem"] + (nd["arc"] if nd["arc"] is not None else 0.0) + used[j]
            f: dict[str, np.ndarray] = {
                "loadavg": cores * 1.05 + 0.1,
                "maxcpu": np.full(clock.n, float(nd["cpus"])),
                "cpu": rho,
                "iowait": np.full(clock.n, 0.0015),
                "memtotal": np.full(clock.n, float(nd["memtotal"])),
                "memused": np.round(memused),
                "swaptotal": np.full(clock.n, 8.0 * GiB),
                "swapused": np.full(clock.n, 0.0),
                "roottotal": np.full(clock.n, 100.0 * 10**9),
                "rootused": np.full(clock.n, 21.5 * 10**9),
                "netin": np.round(2e5 + 3e6 * rho),
                "netout": np.round(1.5e5 + 2e6 * rho),
            }
            if fmt == "pve9":
                noise = np.abs(ou(self.rng, clock.n, 0.3, 2.0))
                f.update(
                    {
                        "memavailable": np.round(nd["memtotal"] - memused),
                        "arcsize": np.round(nd["arc"])
                        if nd["arc"] is not None
                        else np.zeros(clock.n),
                        "pressurecpusome": np.round(self.cpu_psi(rho) + noise, 2),
                        "pressureiosome": np.round(0.2 + 0.5 * noise, 2),
                        "pressureiofull": np.round(0.1 + 0.3 * noise, 2),
                        "pressurememorysome": np.zeros(clock.n),
                        "pressurememoryfull": np.zeros(clock.n),
                    }
                )
            for arr in f.values():
                arr[gap[j]] = np.nan
            assert set(f) == set(NODE_FIELDS_PVE9 if fmt == "pve9" else NODE_FIELDS_PVE2)
            self._series(out / "nodes" / nd["name"], f)
            last = {k: float(v[np.isfinite(v)][-1]) for k, v in f.items()}
            self._json(
                out / "nodes" / nd["name"] / "status.json",
                {
                    "cpu": _num(last["cpu"]),
                    "cpuinfo": {
                        "cpus": nd["cpus"],
                        "cores": nd["cpus"] // 2,
                        "sockets": 1,
                        "model": nd["model"],
                        "mhz": "3000.000",
                    },
                    "ksm": {"shared": 0 if fmt == "pve2" else 1536 * MiB * (j == 0)},
                    "kversion": {
                        "9": "Linux 6.14.11-4-pve #1 SMP PREEMPT_DYNAMIC PMX 6.14.11-4",
                        "8": "Linux 6.8.12-9-pve #1 SMP PREEMPT_DYNAMIC PMX 6.8.12-9",
                        "7": "Linux 5.15.158-2-pve #1 SMP PVE 5.15.158-2",
                    }[self.version[0]],
                    "loadavg": [f"{last['loadavg']:.2f}"] * 3,
                    "memory": {
                        "total": nd["memtotal"],
                        "used": int(last["memused"]),
                        "free": int(nd["memtotal"] - last["memused"]),
                        **(
                            {"available": int(nd["memtotal"] - last["memused"])}
                            if fmt == "pve9"
                            else {}
                        ),
                    },
                    "pveversion": f"pve-manager/{self.version}/0a1b2c3d4e5f6a7b",
                    "swap": {"total": 8 * GiB, "used": 0, "free": 8 * GiB},
                    "uptime": 3_456_000,
                    "wait": 0.0015,
                },
            )
            resources.append(
                {
                    "id": f"node/{nd['name']}",
                    "type": "node",
                    "node": nd["name"],
                    "status": nd["status"],
                    "maxcpu": nd["cpus"],
                    "maxmem": nd["memtotal"],
                    "cpu": _num(last["cpu"]),
                    "mem": int(last["memused"]),
                    "uptime": 3_456_000,
                }
            )
            self._json(
                out / "nodes" / nd["name"] / "versions.json",
                [{"CurrentState": "Installed", "OldVersion": v, "Package": k, "Version": v}
                 for k, v in sorted(self.packages.items())],
            )  # fmt: skip
            tasks = [t for t in self.tasks if t["node"] == nd["name"]]
            self._json(
                out / "nodes" / nd["name"] / "tasks.json",
                sorted(tasks, key=lambda t: -t["starttime"]),
            )
        for g in self.guests:
            assert (
                g.cpu is not None
                and g.memhost is not None
                and g.mem is not None
                and g.node is not None
            )
            listed = int(g.node[-1]) if g.listed_on is None else g.listed_on
            node_now = self.nodes[listed]["name"]
            running = np.isfinite(g.cpu)
            f = {
                "maxcpu": np.full(clock.n, float(g.cores)),
                "cpu": g.cpu / g.cores,
                "maxmem": np.full(clock.n, float(g.maxmem)),
                "mem": np.round(g.mem),
                "maxdisk": np.full(clock.n, float(g.maxdisk)),
                "disk": np.full(clock.n, 0.0 if g.kind == "qemu" else 0.31 * g.maxdisk),
                "netin": np.where(running, np.round(2e4 + 4e5 * g.cpu / g.cores), np.nan),
                "netout": np.where(running, np.round(1e4 + 3e5 * g.cpu / g.cores), np.nan),
                "diskread": np.where(running, np.round(5e3 + 2e6 * g.cpu / g.cores), np.nan),
                "diskwrite": np.where(running, np.round(8e3 + 1e6 * g.cpu / g.cores), np.nan),
            }
            if fmt == "pve9":
                f["memhost"] = np.round(g.memhost)
                share = np.zeros(clock.n)
                for j, nd in enumerate(self.nodes):
                    rho_j = np.minimum(nd["host_cpu"] + demand[j], nd["cpus"]) / nd["cpus"]
                    share = np.where(g.node == j, self.cpu_psi(rho_j), share)
                for key, v in (("pressurecpusome", share * 0.8), ("pressurecpufull", share * 0.3),
                               ("pressureiosome", np.full(clock.n, 0.05)), ("pressureiofull", np.full(clock.n, 0.02)),
                               ("pressurememorysome", np.zeros(clock.n)), ("pressurememoryfull", np.zeros(clock.n))):  # fmt: skip
                    f[key] = np.where(running, np.round(v, 2), np.nan)
            for key in ("cpu", "mem", "memhost"):
                if key in f:
                    f[key] = np.where(running, f[key], np.nan)
            for j in range(n_nodes):
                for arr in f.values():
                    arr[gap[j] & (g.node == j)] = np.nan
            if g.created is not None:  # the RRD file did not exist yet: rows without any value
                for arr in f.values():
                    arr[clock.t <= g.created] = np.nan
            assert set(f) == set(VM_FIELDS_PVE9 if fmt == "pve9" else VM_FIELDS_PVE2)
            gdir = out / "nodes" / node_now / g.kind / str(g.vmid)
            self._series(gdir, f)
            self._json(gdir / "config.json", g.config)
            cur = -1
            resources.append(
                {
                    "id": f"{g.kind}/{g.vmid}",
                    "type": g.kind,
                    "vmid": g.vmid,
                    "node": node_now,
                    "name": g.name,
                    "status": "running" if running[cur] else "stopped",
                    "maxcpu": g.cores,
                    "maxmem": g.maxmem,
                    "maxdisk": int(g.maxdisk),
                    "cpu": _num(float(f["cpu"][cur])) if running[cur] else 0,
                    "mem": int(f["mem"][cur]) if running[cur] else 0,
                    "disk": int(f["disk"][cur]),
                    "uptime": 1_234_567 if running[cur] else 0,
                    "template": 0,
                    **(
                        {"memhost": int(f["memhost"][cur]) if running[cur] else 0}
                        if fmt == "pve9" and g.kind == "qemu"
                        else {}
                    ),
                    **({"hastate": "started" if running[cur] else "stopped"} if g.ha else {}),
                }
            )
        for storage, plugin, shared in storages:
            for nd in self.nodes:
                resources.append(
                    {
                        "id": f"storage/{nd['name']}/{storage}",
                        "type": "storage",
                        "storage": storage,
                        "node": nd["name"],
                        "plugintype": plugin,
                        "shared": int(shared),
                        "status": "available",
                        "content": "images,rootdir" if plugin != "dir" else "iso,vztmpl,backup",
                    }
                )
        self._json(out / "cluster" / "resources.json", sorted(resources, key=lambda r: r["id"]))
        self._json(out / "cluster" / "options.json", options)
        ha = [{"sid": g.sid, "type": g.sid[:2], **g.ha} for g in self.guests if g.ha]
        self._json(out / "cluster" / "ha" / "resources.json", sorted(ha, key=lambda r: r["sid"]))
        if rules is not None:
            self._json(out / "cluster" / "ha" / "rules.json", rules)
        if groups is not None:
            self._json(out / "cluster" / "ha" / "groups.json", groups)
        self._json(out / "cluster" / "ha" / "manager_status.json", manager_status)
        if pci is not None:
            self._json(out / "cluster" / "mapping" / "pci.json", pci)
        self._json(
            out / "version.json",
            {
                "release": self.version.rsplit(".", 1)[0],
                "repoid": "0a1b2c3d",
                "version": self.version,
            },
        )
        missing = []
        if rules is None:
            missing.append(
                {
                    "path": "/cluster/ha/rules",
                    "error": "No 'get' handler defined for 'cluster/ha/rules'",
                }
            )
        if groups is None:
            missing.append(
                {
                    "path": "/cluster/ha/groups",
                    "error": "all HA groups have been migrated to HA rules",
                }
            )
        if pci is None:
            missing.append({"path": "/cluster/mapping/pci", "error": "no mappings configured"})
        self._json(
            out / "export.json",
            {
                "format": "pvegym-pve-export/1",
                "created": EXPORT_TIME,
                "script_version": "1",
                "exported_on": self.nodes[0]["name"],
                "anonymized": False,
                "timeframes": ["hour", "day", "week"],
                "cfs": ["AVERAGE", "MAX"],
                "since": CTIME - 8 * DAY if fmt == "pve9" else CTIME - 9 * DAY,
                "missing": missing,
            },
        )

    def _series(self, where: Path, fields: dict[str, np.ndarray]) -> None:
        for tf in ("hour", "day", "week"):
            for cf in ("AVERAGE", "MAX"):
                rows = rrd_rows(fields, self.fmt, tf, cf)
                where.mkdir(parents=True, exist_ok=True)
                data = json.dumps(rows, separators=(",", ":"), sort_keys=True).encode() + b"\n"
                # mtime=0: the same bytes on every rebuild
                (where / f"rrddata-{tf}-{cf}.json.gz").write_bytes(gzip.compress(data, 9, mtime=0))

    @staticmethod
    def _json(path: Path, doc: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def place(g: Guest, clock: Clock, moves: list[tuple[int, int]], start: int) -> None:
    """The guest's node per PDP: ``start``, then each ``(t, node)`` from ``t`` on."""
    g.node = np.full(clock.n, start)
    for t, j in moves:
        g.node[clock.t > t] = j


# ---------------------------------------------------------------------------------- PVE 9
def pve9_field() -> Cluster:
    """The field report's two-node PVE 9.2 cluster being stress-tested with ha=dynamic and
    ha-auto-rebalance, plus a third node in maintenance: one week, 1-min/30-min RRD.

    The export ran on Friday 2026-11-20 12:00 UTC; the week series cover Fri 13 12:00 → Fri 20
    12:00, the 1-minute day series Thu 19 12:00 → Fri 20 12:00. Workload: weekday office-hours web
    and database load (peaks at 14:00 UTC), a bursty non-HA CI runner with a local disk, and
    ``vm:101``, a 20-vCPU stress VM with the Debian ISO in a local CD-ROM: during two stress runs
    (Tue 17 13:00–13:45 and Fri 20 09:30–11:30 UTC) it burns ~19.5 cores on pve-ams-01. The real
    balancer then tried to move it every ~40 s and failed every time (the failed ``qmigrate``
    tasks in ``tasks.json``) — the field report's failure loop. The operator moved ``vm:107`` to
    pve-ams-02 by hand (Sun 15 10:15), and the HA manager evacuated ``ct:200`` off pve-ams-03
    when it entered maintenance (Sat 14 08:00). pvestatd on pve-ams-02 was down for 5 minutes on
    Fri 20 at 03:10 (empty rows).
    """
    c = Cluster("pve9-field", "pve9", "9.2.5", 7 * 1440 + 60, seed=9, packages=PVE9_PACKAGES)
    k, rng = c.clock, c.rng
    n = k.n
    backup = ((k.tod_h >= 1.0) & (k.tod_h < 1.67)).astype(float)  # nightly vzdump, 01:00–01:40
    c.node(
        "pve-ams-01",
        32,
        128,
        "AMD EPYC 7313P 16-Core Processor",
        0.4 + 1.5 * backup + np.abs(ou(rng, n, 0.08, 5)),
        6 * GiB + 1.5 * GiB * backup + ou(rng, n, 0.2 * GiB, 60),
        12 * GiB + ou(rng, n, 1.0 * GiB, 240),
    )
    c.node(
        "pve-ams-02",
        32,
        128,
        "AMD EPYC 7313P 16-Core Processor",
        0.35 + 1.2 * backup + np.abs(ou(rng, n, 0.08, 5)),
        5.5 * GiB + 1.5 * GiB * backup + ou(rng, n, 0.2 * GiB, 60),
        8 * GiB + ou(rng, n, 0.8 * GiB, 240),
    )
    c.node(
        "pve-ams-03",
        16,
        64,
        "Intel Xeon E-2388G",
        0.15 + np.abs(ou(rng, n, 0.03, 5)),
        3.5 * GiB + ou(rng, n, 0.1 * GiB, 60),
        None,
    )
    office = daily(k, 14.0, 3.5) * (((k.t - 30) // DAY + 3) % 7 < 5)  # Mon–Fri (epoch day: Thu)

    stress = k.between(k.at(4, 13.0), k.at(4, 13.75)) | k.between(k.at(7, 9.5), k.at(7, 11.5))
    g101 = Guest(
        101,
        "qemu",
        "stress-cdrom",
        16,
        32768,
        {
            "cores": 16,
            "cpu": "x86-64-v2-AES",
            "ide2": "local:iso/debian-13.0.0-amd64-netinst.iso,media=cdrom,size=754M",
            "memory": "32768",
            "numa": 0,
            "ostype": "l26",
            "scsi0": "ceph-vm:vm-101-disk-0,size=64G",
            "sockets": 1,
        },
        {"state": "started", "failback": 1, "max_relocate": 1, "max_restart": 1},
    )
    g101.cpu = np.clip(
        np.where(stress, 14.0 + ou(rng, n, 0.3, 1), 0.3 + np.abs(ou(rng, n, 0.08, 10))), 0, 16
    )
    g101.memhost = np.where(stress, 12 * GiB, 6 * GiB) + ou(rng, n, 0.05 * GiB, 30)
    g101.mem = g101.memhost * 0.93
    place(g101, k, [], 0)
    webs = []
    for vmid, name in ((102, "web-01"), (103, "web-02")):
        g = Guest(
            vmid,
            "qemu",
            name,
            4,
            8192,
            {
                "balloon": 4096,
                "cores": 4,
                "memory": "8192",
                "ostype": "l26",
                "sockets": 1,
                "scsi0": f"ceph-vm:vm-{vmid}-disk-0,size=32G",
            },
            {"state": "started", "failback": 1, "max_relocate": 1, "max_restart": 1},
        )
        g.cpu = np.clip(0.3 + 1.4 * office + np.abs(ou(rng, n, 0.15, 3)), 0, 4)
        g.memhost = 5.5 * GiB + 0.5 * GiB * office + ou(rng, n, 0.05 * GiB, 30)
        g.mem = g.memhost * 0.8
        place(g, k, [], 1)
        webs.append(g)
    dbs = []
    for vmid, name, j in ((104, "db-01", 0), (105, "db-02", 1)):
        g = Guest(
            vmid,
            "qemu",
            name,
            8,
            32768,
            {
                "cores": 8,
                "hugepages": "2",
                "memory": "32768",
                "numa": 1,
                "ostype": "l26",
                "sockets": 1,
                "scsi0": f"ceph-vm:vm-{vmid}-disk-0,size=200G",
            },
            {"state": "started", "failback": 1, "max_relocate": 1, "max_restart": 1},
        )
        g.cpu = np.clip(1.2 + 2.0 * office + np.abs(ou(rng, n, 0.25, 5)), 0, 8)
        g.memhost = 28.5 * GiB + ou(rng, n, 0.1 * GiB, 120)
        g.mem = g.memhost * 0.86
        place(g, k, [], j)
        dbs.append(g)
    g106 = Guest(
        106,
        "qemu",
        "ci-runner",
        8,
        16384,
        {
            "cores": 8,
            "memory": "16384",
            "ostype": "l26",
            "sockets": 1,
            "scsi0": "local-zfs:vm-106-disk-0,size=120G",
        },
        None,
    )
    builds = np.zeros(n)
    for start in np.sort(rng.uniform(0, n - 30, 60)).astype(int):
        if office[start] > 0.2:
            builds[start : start + int(rng.integers(8, 25))] = rng.uniform(4.0, 6.5)
    builds = np.where(stress, 7.6, builds)  # the operator's second load generator
    g106.cpu = np.clip(0.15 + builds + np.abs(ou(rng, n, 0.05, 2)), 0, 8)
    g106.memhost = 6 * GiB + 0.4 * builds * GiB + ou(rng, n, 0.05 * GiB, 10)
    g106.mem = g106.memhost
    place(g106, k, [], 0)
    g107 = Guest(
        107,
        "qemu",
        "mon-01",
        2,
        4096,
        {
            "balloon": 2048,
            "cores": 2,
            "memory": "4096",
            "ostype": "l26",
            "sockets": 1,
            "scsi0": "local-zfs:vm-107-disk-0,size=16G",
        },
        {"state": "started", "failback": 1, "max_relocate": 1, "max_restart": 1},
    )
    g107.cpu = np.clip(0.2 + np.abs(ou(rng, n, 0.04, 5)), 0, 2)
    g107.memhost = 2.6 * GiB + ou(rng, n, 0.02 * GiB, 60)
    g107.mem = g107.memhost * 0.9
    t_move107 = k.at(2, 10.25)
    place(g107, k, [(t_move107 + 40, 1)], 0)
    g108 = Guest(
        108,
        "qemu",
        "gpu-render",
        8,
        32768,
        {
            "cores": 8,
            "hostpci0": "0000:41:00.0,pcie=1,x-vga=1",
            "machine": "q35",
            "memory": "32768",
            "ostype": "win11",
            "sockets": 1,
            "scsi0": "ceph-vm:vm-108-disk-0,size=256G",
        },
        {"state": "stopped", "failback": 1, "max_relocate": 1, "max_restart": 1},
    )
    g108.cpu = np.full(n, np.nan)
    g108.memhost = g108.mem = np.full(n, np.nan)
    place(g108, k, [], 1)
    g200 = Guest(
        200,
        "lxc",
        "dns-01",
        2,
        2048,
        {
            "arch": "amd64",
            "cores": 2,
            "memory": 2048,
            "ostype": "debian",
            "rootfs": "ceph-vm:vm-200-disk-0,size=8G",
            "swap": 512,
            "unprivileged": 1,
        },
        {"state": "started", "failback": 1, "max_relocate": 1, "max_restart": 1},
        8,
    )
    g200.cpu = np.clip(0.05 + np.abs(ou(rng, n, 0.02, 5)), 0, 2)
    g200.memhost = 0.3 * GiB + ou(rng, n, 0.01 * GiB, 60)
    g200.mem = g200.memhost
    t_evac = k.at(1, 8.0)
    place(g200, k, [(t_evac + 45, 1)], 2)
    c.guests = [g101, *webs, *dbs, g106, g107, g108, g200]
    c.gaps = [(1, k.at(7, 3.0 + 10 / 60), k.at(7, 3.0 + 15 / 60))]

    # the real balancer's failure loop: every ~40 s during the stress runs (hold 3 rounds + LRM)
    for t0, t1 in ((k.at(4, 13.0), k.at(4, 13.75)), (k.at(7, 9.5), k.at(7, 11.5))):
        t = t0 + 45.0
        while t < t1:
            c.tasks.append(
                {
                    "type": "qmigrate",
                    "id": "101",
                    "node": "pve-ams-01",
                    "starttime": int(t),
                    "endtime": int(t) + 3,
                    "status": "error",
                }
            )
            t += 40.0 + float(rng.uniform(-2.0, 2.0))
    c.tasks.append(
        {
            "type": "hamigrate",  # qemu-server API2/Qemu.pm: fork_worker('hamigrate', $vmid, …)
            "id": "107",
            "node": "pve-ams-01",
            "starttime": t_move107 - 8,
            "endtime": t_move107 - 7,
            "status": "OK",
        }
    )
    c.tasks.append(
        {
            "type": "qmigrate",
            "id": "107",
            "node": "pve-ams-01",
            "starttime": t_move107,
            "endtime": t_move107 + 40,
            "status": "OK",
        }
    )
    c.tasks.append(
        {
            "type": "vzmigrate",
            "id": "200",
            "node": "pve-ams-03",
            "starttime": t_evac,
            "endtime": t_evac + 45,
            "status": "OK",
        }
    )

    options = {
        "crs": {"ha": "dynamic", "ha-rebalance-on-start": 1, "ha-auto-rebalance": 1,
                "ha-auto-rebalance-threshold": 30, "ha-auto-rebalance-hold-duration": 3,
                "ha-auto-rebalance-margin": 10, "ha-auto-rebalance-method": "bruteforce"},
        "ha": {"shutdown_policy": "conditional"},
        "migration": {"type": "secure"},
    }  # fmt: skip
    rules = [
        {"rule": "web-together", "type": "resource-affinity", "affinity": "positive",
         "resources": "vm:102,vm:103", "disable": 0, "order": 1},
        {"rule": "db-apart", "type": "resource-affinity", "affinity": "negative",
         "resources": "vm:104,vm:105", "disable": 0, "order": 2},
        {"rule": "mon-prefers-02", "type": "node-affinity", "nodes": "pve-ams-02:2,pve-ams-01:1",
         "resources": "vm:107", "strict": 0, "disable": 0, "order": 3},
        {"rule": "gpu-on-02", "type": "node-affinity", "nodes": "pve-ams-02", "resources": "vm:108",
         "strict": 1, "disable": 1, "order": 4},
    ]  # fmt: skip
    service = {g.sid: {"node": "pve-ams-0" + str(int(g.node[-1]) + 1), "running": int(g.ha["state"] == "started"),
                       "state": g.ha["state"], "uid": f"{g.vmid:x}uid0fixture"}
               for g in c.guests if g.ha}  # fmt: skip
    ms = {
        "manager_status": {"master_node": "pve-ams-01",
                           "node_status": {"pve-ams-01": "online", "pve-ams-02": "online", "pve-ams-03": "maintenance"},
                           "service_status": service, "timestamp": EXPORT_TIME - 4},
        "lrm_status": {"pve-ams-01": {"mode": "active", "state": "active", "timestamp": EXPORT_TIME - 6, "results": {}},
                       "pve-ams-02": {"mode": "active", "state": "active", "timestamp": EXPORT_TIME - 3, "results": {}},
                       "pve-ams-03": {"mode": "maintenance", "state": "maintenance", "timestamp": EXPORT_TIME - 8, "results": {}}},
        "quorum": {"node": "pve-ams-01", "quorate": 1},
    }  # fmt: skip
    storages = [("local", "dir", False), ("local-zfs", "zfspool", False), ("ceph-vm", "rbd", True)]
    c._pending = (options, rules, None, ms, storages, [])  # type: ignore[attr-defined]
    return c


# ---------------------------------------------------------------------------------- PVE 8
def pve8_groups() -> Cluster:
    """A three-node PVE 8.4 cluster with HA groups (no rules yet), static CRS, a migration
    bandwidth limit, a nightly backup (02:00–03:00: one core and 1 GiB of host load on each node),
    a legacy VM with the host's physical CD-ROM drive passed through, a non-HA VM with a USB
    device and a container with a bind mount; RRD in
    PVE 8's ``pve2`` format (no memhost, no PSI; 30-min rows for a day, 3-hour rows for a week)."""
    c = Cluster("pve8-groups", "pve2", "8.4.1", 210 * 60 + 60, seed=8, packages=PVE8_PACKAGES)
    k, rng = c.clock, c.rng
    n = k.n
    backup = ((k.tod_h >= 2.0) & (k.tod_h < 3.0)).astype(float)  # nightly vzdump, 02:00–03:00
    for name, cpus, mem in (("pve8-a", 24, 96), ("pve8-b", 24, 96), ("pve8-c", 16, 64)):
        c.node(
            name,
            cpus,
            mem,
            "Intel Xeon Silver 4214R",
            0.3 + backup + np.abs(ou(rng, n, 0.05, 5)),
            4 * GiB + GiB * backup + ou(rng, n, 0.1 * GiB, 60),
            None,
        )
    office = daily(k, 13.0, 3.0)
    specs = [
        (201, "app-01", 0, 6, 12288, {"state": "started", "group": "prefer-a"}, {}),
        (202, "app-02", 1, 6, 12288, {"state": "started", "group": "only-ab"}, {}),
        (203, "legacy-01", 0, 4, 8192, {"state": "started"}, {"ide2": "cdrom,media=cdrom"}),
        (204, "batch-01", 2, 8, 16384, None, {"usb0": "host=1050:0407"}),
    ]
    for vmid, name, j, cores, mem, ha, extra in specs:
        g = Guest(
            vmid,
            "qemu",
            name,
            cores,
            mem,
            {
                "cores": cores,
                "memory": str(mem),
                "ostype": "l26",
                "sockets": 1,
                "scsi0": f"nfs-vm:{vmid}/vm-{vmid}-disk-0.qcow2,size=40G",
                **extra,
            },
            {"failback": 1, "max_relocate": 1, "max_restart": 1, **ha} if ha else None,
        )
        g.cpu = np.clip(0.4 + 0.4 * cores * office + np.abs(ou(rng, n, 0.2, 5)), 0, cores)
        g.memhost = 0.6 * mem * MiB + ou(rng, n, 0.05 * GiB, 60)
        g.mem = g.memhost
        place(g, k, [], j)
        c.guests.append(g)
    g300 = Guest(
        300,
        "lxc",
        "proxy",
        2,
        1024,
        {
            "arch": "amd64",
            "cores": 2,
            "memory": 1024,
            "mp0": "/srv/cache",
            "ostype": "debian",
            "rootfs": "local-lvm:vm-300-disk-0,size=8G",
            "swap": 512,
        },
        {"state": "started", "failback": 1, "max_relocate": 1, "max_restart": 1},
        8,
    )
    g300.cpu = np.clip(0.1 + 0.3 * office + np.abs(ou(rng, n, 0.03, 5)), 0, 2)
    g300.memhost = 0.4 * GiB + ou(rng, n, 0.01 * GiB, 60)
    g300.mem = g300.memhost
    place(g300, k, [], 1)
    c.guests.append(g300)
    options = {
        "bwlimit": "migration=256000",
        "crs": {"ha": "static", "ha-rebalance-on-start": 1},
        "migration": {"type": "secure"},
    }
    groups = [
        {"group": "prefer-a", "nodes": "pve8-a:2,pve8-b:1", "nofailback": 1, "restricted": 0, "type": "group"},
        {"group": "only-ab", "nodes": "pve8-a,pve8-b", "nofailback": 0, "restricted": 1, "type": "group"},
    ]  # fmt: skip
    service = {g.sid: {"node": c.nodes[int(g.node[-1])]["name"], "running": 1, "state": "started",
                       "uid": f"{g.vmid:x}uid0fixture"} for g in c.guests if g.ha}  # fmt: skip
    ms = {
        "manager_status": {"master_node": "pve8-b",
                           "node_status": {"pve8-a": "online", "pve8-b": "online", "pve8-c": "online"},
                           "service_status": service, "timestamp": EXPORT_TIME - 5},
        "lrm_status": {x: {"mode": "active", "state": "active", "timestamp": EXPORT_TIME - 5, "results": {}}
                       for x in ("pve8-a", "pve8-b", "pve8-c")},
        "quorum": {"node": "pve8-b", "quorate": 1},
    }  # fmt: skip
    storages = [("local", "dir", False), ("local-lvm", "lvmthin", False), ("nfs-vm", "nfs", True)]
    c._pending = (options, None, groups, ms, storages, None)  # type: ignore[attr-defined]
    return c


# ---------------------------------------------------------------------------------- PVE 7
def _pve7(c: Cluster, nodes: list[tuple[str, int, int]]) -> tuple[Clock, np.random.Generator]:
    """PVE 7.4's two shapes the real exports show: nodes with a small host load, no HA at all."""
    k, rng = c.clock, c.rng
    for name, cpus, mem in nodes:
        c.node(name, cpus, mem, "Intel Xeon Gold 6354", 0.3 + np.abs(ou(rng, k.n, 0.05, 5)),
               3 * GiB + ou(rng, k.n, 0.1 * GiB, 60), None)  # fmt: skip
    return k, rng


def _pve7_pending(c: Cluster, crs: dict[str, Any]) -> None:
    """No HA resource (the CRM idles: an empty manager status), no rules API (PVE 7), no PCI
    mappings API (PVE ≥ 8)."""
    options = {"crs": crs, "migration": {"type": "secure"}}
    ms: dict[str, Any] = {"manager_status": {}, "lrm_status": {},
                          "quorum": {"node": c.nodes[0]["name"], "quorate": 1}}  # fmt: skip
    storages = [("local", "dir", False), ("local-lvm", "lvmthin", False), ("ceph", "rbd", True)]
    c._pending = (options, None, [], ms, storages, None)  # type: ignore[attr-defined]


def pve7_nonha() -> Cluster:
    """A two-node PVE 7.4 cluster without any HA resource (``pve2`` RRD: 70-row hour, 30-min day,
    3-hour week), CRS ``static``, the misreadings real PVE 7 exports show:

    * ``ct:200`` has no ``cores`` (nor ``cpulimit``): the API reports the host's 72 CPUs as its
      ``maxcpu`` (pve-container ``vmstatus``), its ``cpu`` a fraction of those;
    * ``vm:102`` was created on Thu 19 at 18:00 UTC: its RRD has no value before (rows with a
      time only);
    * ``vm:103`` is listed on pve7-a but its load ran on pve7-b all window (a placement the task
      log does not explain): pve7-a's guests exceed pve7-a's own CPU in every row.
    """
    c = Cluster("pve7-nonha", "pve2", "7.4-17", 210 * 60 + 60, seed=7, packages=PVE7_PACKAGES)
    k, rng = _pve7(c, [("pve7-a", 16, 64), ("pve7-b", 72, 256)])
    n = k.n
    office = daily(k, 13.0, 3.0)
    specs = [  # vmid, kind, name, node, cores (the API's maxcpu), MiB, config, busy cores
        (100, "qemu", "app-01", 0, 8, 8192, {"cores": 8, "memory": "8192"}, 2.5),
        (101, "qemu", "db-01", 0, 4, 16384, {"cores": 4, "memory": "16384"}, 1.0),
        (102, "qemu", "new-01", 1, 4, 4096, {"cores": 4, "memory": "4096"}, 1.5),
        (103, "qemu", "batch-01", 1, 8, 8192, {"cores": 8, "memory": "8192"}, 3.0),
        (200, "lxc", "files", 1, 72, 4096, {"memory": 4096, "swap": 512}, 1.2),
    ]
    for vmid, kind, name, j, cores, mem, cfg, busy in specs:
        disk = "rootfs" if kind == "lxc" else "scsi0"
        cfg = {**cfg, "ostype": "l26" if kind == "qemu" else "debian",
               disk: f"ceph:vm-{vmid}-disk-0,size=32G"}  # fmt: skip
        g = Guest(vmid, kind, name, cores, mem, cfg, None)
        g.cpu = np.clip(0.2 * busy + busy * office + np.abs(ou(rng, n, 0.1, 5)), 0, cores)
        g.memhost = 0.5 * mem * MiB + ou(rng, n, 0.02 * GiB, 60)
        g.mem = g.memhost
        place(g, k, [], j)
        c.guests.append(g)
    c.guests[2].created = k.at(6, 18.0)
    c.guests[2].cpu = np.where(k.t > k.at(6, 18.0), c.guests[2].cpu, np.nan)
    c.guests[3].listed_on = 0
    _pve7_pending(c, {"ha": "static"})
    return c


def pve7_single() -> Cluster:
    """A one-node PVE 7.4 "cluster" without HA (a VM and a container): nothing can move."""
    c = Cluster("pve7-single", "pve2", "7.4-17", 210 * 60 + 60, seed=71, packages=PVE7_PACKAGES)
    k, rng = _pve7(c, [("pve7-solo", 8, 32)])
    for vmid, kind, cores, cfg in ((100, "qemu", 4, {"cores": 4, "memory": "4096"}),
                                   (200, "lxc", 2, {"cores": 2, "memory": 1024})):  # fmt: skip
        disk = "rootfs" if kind == "lxc" else "scsi0"
        g = Guest(vmid, kind, f"guest-{vmid}", cores, 4096,
                  {**cfg, disk: f"local-lvm:vm-{vmid}-disk-0,size=8G"}, None)  # fmt: skip
        g.cpu = np.clip(0.5 + 1.5 * daily(k, 13.0) + np.abs(ou(rng, k.n, 0.1, 5)), 0, cores)
        g.memhost = 2 * GiB + ou(rng, k.n, 0.02 * GiB, 60)
        g.mem = g.memhost
        place(g, k, [], 0)
        c.guests.append(g)
    _pve7_pending(c, {"ha": "basic"})
    return c


def main() -> None:
    for build in (pve9_field, pve8_groups, pve7_nonha, pve7_single):
        c = build()
        c.write(HERE, *c._pending)  # type: ignore[attr-defined]
        size = sum(p.stat().st_size for p in (HERE / c.name).rglob("*") if p.is_file())
        print(f"{c.name}: {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
