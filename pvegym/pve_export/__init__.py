"""Reading an operator's Proxmox VE export (``scripts/pve-export.sh``) into a pvegym scenario.

* :mod:`~pvegym.pve_export.files` — the export's files (a directory or a tarball), JSON read with
  every error naming the file and the field.
* :mod:`~pvegym.pve_export.rrd` — RRD series: the resolutions of PVE 7/8's and PVE 9's formats,
  choosing the finest series that covers a window, gaps.
* :mod:`~pvegym.pve_export.blockers` — what makes a migration fail, read from a guest's config as
  qemu-server's and pve-container's checks read it.
* :mod:`~pvegym.pve_export.cluster` — the whole export, typed and cross-checked.
* :mod:`~pvegym.pve_export.window` — the window replayed and its grid; :mod:`~pvegym.pve_export.
  placement` — where each guest was, and the window's migrations.
* :mod:`~pvegym.pve_export.to_scenario` — the cluster as scenario data and traces, with
  :mod:`~pvegym.pve_export.notes` on what the scenario cannot represent (``pvegym import``);
  :mod:`~pvegym.pve_export.write` writes them.

This package is in the experiment layer: it reads operator files and writes scenario files; the
model only ever reads the scenario and its traces.
"""
