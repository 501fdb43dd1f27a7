"""Rebuild the bundled trace subset from the shared copies (run once; documented in README.md).

    python pvegym/data/traces/make_subset.py /work/shared/traces

PlanetLab (CloudSim copy): per-VM files of 288 integer CPU percentages (5-min samples, 24 h).
We keep the first ``PER_DAY`` files, in sorted name order, whose mean utilisation is within
``[MIN_MEAN, MAX_MEAN]`` % and whose name has no space, from each of the two days, copied byte for
byte into ``planetlab/<day>_<file>``. A low-utilisation sliver (the median is ~6 %) would need
dozens of guests per node to load a cluster, so only busier slivers are kept.

Bitbrains (OpenDC ``bitbrains-small``): ``trace.csv.gz`` merges identical consecutive samples
(``duration`` a multiple of 300 s); each row is expanded to ``duration / 300 s`` samples. We keep
the first ``BB_DAYS`` days of the ``BB_VMS`` VMs with the highest mean CPU utilisation, and write
``bitbrains/<id>.csv``: a ``#`` metadata line (``interval_s``, ``cpu_count``,
``cpu_capacity_mhz``, ``mem_capacity_kb``) and a ``cpu_mhz`` column. The OpenDC single-VM file
(the only one with a memory series) becomes ``bitbrains/single-vm.csv`` with ``cpu_mhz,mem_kb``.
"""

from __future__ import annotations

import csv
import gzip
import shutil
import sys
from collections import defaultdict
from pathlib import Path

PER_DAY = 24
MIN_MEAN, MAX_MEAN = 15.0, 70.0
BB_VMS = 24
BB_DAYS = 7
STEP_MS = 300_000


def planetlab(src: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for day in ("20110303", "20110322"):
        kept = 0
        for f in sorted((src / day).iterdir()):
            if " " in f.name:
                continue
            vals = [int(x) for x in f.read_text().split()]
            mean = sum(vals) / len(vals)
            if MIN_MEAN <= mean <= MAX_MEAN:
                shutil.copyfile(f, out / f"{day}_{f.name}")
                kept += 1
                if kept == PER_DAY:
                    break


def bitbrains(src: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    meta: dict[str, dict[str, str]] = {}
    with gzip.open(src / "bitbrains-small" / "meta.csv.gz", "rt") as fh:
        for row in csv.DictReader(fh):
            meta[row["id"]] = row
    series: dict[str, list[float]] = defaultdict(list)
    with gzip.open(src / "bitbrains-small" / "trace.csv.gz", "rt") as fh:
        for row in csv.DictReader(fh):
            reps = max(1, round(int(row["duration"]) / STEP_MS))
            series[row["id"]].extend([float(row["cpu_usage"])] * reps)
    n = BB_DAYS * 288
    util = {
        vm: sum(v[:n]) / len(v[:n]) / float(meta[vm]["cpu_capacity"])
        for vm, v in series.items()
        if len(v) >= n
    }
    for vm in sorted(util, key=lambda k: -util[k])[:BB_VMS]:
        m = meta[vm]
        lines = [
            f"# id={vm} interval_s=300 cpu_count={m['cpu_count']} "
            f"cpu_capacity_mhz={float(m['cpu_capacity']):.3f} "
            f"mem_capacity_kb={float(m['mem_capacity']):.0f}",
            "cpu_mhz",
            *(f"{x:.1f}" for x in series[vm][:n]),
        ]
        (out / f"{vm}.csv").write_text("\n".join(lines) + "\n")
    rows = (src / "single-vm" / "bitbrains.csv").read_text().splitlines()[1:]
    cells = [[c.strip() for c in r.split(";")] for r in rows if r.strip()]
    first = cells[0]
    lines = [
        f"# id=single-vm interval_s=300 cpu_count={int(float(first[1]))} "
        f"cpu_capacity_mhz={float(first[2]):.3f} mem_capacity_kb={float(first[5]):.0f}",
        "cpu_mhz,mem_kb",
        *(f"{float(c[3]):.1f},{float(c[6]):.0f}" for c in cells[:n]),
    ]
    (out / "single-vm.csv").write_text("\n".join(lines) + "\n")


def main() -> None:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/traces")
    here = Path(__file__).resolve().parent
    planetlab(src / "planetlab-cloudsim", here / "planetlab")
    bitbrains(src / "bitbrains-opendc", here / "bitbrains")
    shutil.copyfile(
        src / "planetlab-cloudsim" / "LICENSE-CloudSim-Apache-2.0.txt",
        here / "planetlab" / "LICENSE-CloudSim-Apache-2.0.txt",
    )
    shutil.copyfile(
        src / "bitbrains-opendc" / "LICENSE-OpenDC-MIT.txt",
        here / "bitbrains" / "LICENSE-OpenDC-MIT.txt",
    )


if __name__ == "__main__":
    main()
