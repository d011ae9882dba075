"""The TPU chips of this machine that measuring workers can be pinned to, one worker per chip: counted as libtpu
will see them, read from the environment, /dev and sysfs only (no jax, no libtpu: opening a chip takes 10-15 s
and holds it, so the count must come before any worker opens one).

The rule, first that applies:
1. TPU_VISIBLE_CHIPS is set (Ray sets it for a task or actor it gave TPUs; a user may set it): those chips.
2. /dev/accelN character devices (v4, v5p): one chip each (a directory /dev/accel, NVIDIA's, is no chip).
3. /dev/vfio/N groups (v5e and later): one chip per group that holds a Google PCI device (vendor 0x1ae0), read
   from /sys/kernel/iommu_groups/N/devices; where sysfs has no such directory (a gVisor sandbox), a group
   counts when the PCI bus shows a Google TPU.
The PCI bus alone is never the count. The v5e lent on 2026-12-07 (bench/chip/v5e_host_probe.txt) listed four
TPU functions (0x0063) but passed one vfio group through; jax saw one chip. jax's own
`hardware_utils.num_available_tpu_chips_and_device_id` counts PCI functions (it would say four); Ray's TPU
resource counts device nodes as above, so a Ray node's "TPU" figure and this count agree.

A worker is pinned with `pin_env(i)`: TPU_VISIBLE_CHIPS=i with per-process bounds of one chip. libtpu then
skips its host-wide lockfile (/tmp/libtpu_lockfile, taken only when TPU_CHIPS_PER_PROCESS_BOUNDS, or the older
TPU_CHIPS_PER_HOST_BOUNDS, is unset or "2,2,1"), so one process per chip can run at once. One chip: no pin at all
(the one-worker path as before).

May import the standard library only.
"""

from __future__ import annotations

import glob
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GOOGLE_PCI_VENDOR = "0x1ae0"
# Google PCI device id -> TPU generation (the ids jax and Google's tpu-info read; 0x0027, v2/v3, is no Pallas target)
PCI_DEVICE_CHIPS = {"0x005e": "v4", "0x0062": "v5p", "0x0063": "v5e", "0x006f": "v6e", "0x0076": "v7x"}
MESH_PORT_BASE = 8476  # libtpu's mesh controller port of the first pinned worker; worker i uses BASE + i
PROCESS_PORT_BASE = 8576  # TPU_PROCESS_PORT of worker i: BASE + i (each process its own, never shared)


@dataclass(frozen=True)
class LocalChips:
    """The chips a worker may be pinned to (libtpu's indices) and which rule found them."""

    indices: tuple[int, ...]
    source: str  # "TPU_VISIBLE_CHIPS", "/dev/accel", "/dev/vfio" or "none"

    @property
    def count(self) -> int:
        return len(self.indices)

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "indices": list(self.indices), "source": self.source}


def read_attr(path: str) -> str:
    """A sysfs/procfs attribute, stripped and lower-cased; "" when it cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip().lower()
    except OSError:
        return ""


def _google_tpu_on_bus(root: str) -> bool:
    return any(
        read_attr(os.path.join(d, "vendor")) == GOOGLE_PCI_VENDOR and read_attr(os.path.join(d, "device")) in PCI_DEVICE_CHIPS
        for d in glob.glob(os.path.join(root, "sys", "bus", "pci", "devices", "*"))
    )


def _group_is_tpu(root: str, group: str, bus_has_tpu: bool) -> bool:
    """Does vfio group `group` hold a Google device? Unknown to sysfs (a sandbox): when the bus shows a TPU."""
    devices = os.path.join(root, "sys", "kernel", "iommu_groups", group, "devices")
    if not os.path.isdir(devices):
        return bus_has_tpu
    return any(read_attr(os.path.join(d, "vendor")) == GOOGLE_PCI_VENDOR for d in glob.glob(os.path.join(devices, "*")))


def _visible(value: str) -> tuple[int, ...] | None:
    """TPU_VISIBLE_CHIPS "0,2" -> (0, 2); None when it is not a list of chip numbers."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    return tuple(int(p) for p in parts) if parts and all(p.isdigit() for p in parts) else None


def local_chips(root: str = "/", env: Mapping[str, str] | None = None) -> LocalChips:
    """The TPU chips below `root` (sysfs- and /dev-shaped directories in tests) by the module's rule."""
    env = os.environ if env is None else env
    if "TPU_VISIBLE_CHIPS" in env:  # "" is none at all (Ray's word for a task given no TPU)
        return LocalChips(_visible(env["TPU_VISIBLE_CHIPS"]) or (), "TPU_VISIBLE_CHIPS")
    accel = [p for p in glob.glob(os.path.join(root, "dev", "accel*")) if not os.path.isdir(p)]
    if accel:
        return LocalChips(tuple(range(len(accel))), "/dev/accel")
    groups = [g for g in _listdir(os.path.join(root, "dev", "vfio")) if g.isdigit()]
    if groups:
        bus = _google_tpu_on_bus(root)
        tpus = [g for g in groups if _group_is_tpu(root, g, bus)]
        if tpus:
            return LocalChips(tuple(range(len(tpus))), "/dev/vfio")
    return LocalChips((), "none")


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def pin_env(index: int) -> dict[str, str]:
    """The environment that pins a process to chip `index` of this host, alone (set before jax starts).

    The process-bound names are libtpu's current ones, the host-bound ones its older names: a TPU VM presets the
    latter to the whole host (v5litepod-4: TPU_CHIPS_PER_HOST_BOUNDS=2,2,1), so both are set to one chip. The chip
    is named by TPU_VISIBLE_CHIPS, as Ray and PyTorch/XLA name it (not the older TPU_VISIBLE_DEVICES). Each
    process gets its own mesh-controller and process port (two runtimes on one port: the second cannot start).
    ALLOW_MULTIPLE_LIBTPU_LOAD=1 says outright what the bounds imply (no host-wide lockfile), as jax's own
    multi-process test harness (jax/_src/test_multiprocess.py) does beside the same three variables."""
    one = "1,1,1"
    mesh = MESH_PORT_BASE + index
    return {
        "TPU_VISIBLE_CHIPS": str(index),
        "TPU_CHIPS_PER_PROCESS_BOUNDS": one,
        "TPU_PROCESS_BOUNDS": one,
        "TPU_CHIPS_PER_HOST_BOUNDS": one,
        "TPU_HOST_BOUNDS": one,
        "TPU_MESH_CONTROLLER_ADDRESS": f"localhost:{mesh}",
        "TPU_MESH_CONTROLLER_PORT": str(mesh),
        "TPU_PROCESS_PORT": str(PROCESS_PORT_BASE + index),
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
    }


def measured_on(device_id: int = 0, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Which chip of which host this process measures on: its pinned chip (TPU_VISIBLE_CHIPS, set by pin_env or
    by Ray), else jax's device id."""
    env = os.environ if env is None else env
    visible = _visible(env.get("TPU_VISIBLE_CHIPS", ""))
    chip = visible[0] if visible is not None and len(visible) == 1 else device_id
    return {"host": socket.gethostname(), "chip": chip}
