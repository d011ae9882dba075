"""The TPU of the machine the server runs on, read from what the OS says: no jax, no libtpu, so finding it
costs no start-up time and never claims the chip (only one process may hold it: the tuner must get it).

Google's TPUs are PCI devices of vendor 0x1ae0; the device id names the generation (the ids below are the ones
Google's own `tpu-info` tool reads). Their device nodes are /dev/accelN (v4) or /dev/vfio/N (v5e and later).
Where sysfs shows no PCI device (some containers), a TPU VM's TPU_ACCELERATOR_TYPE (`v5litepod-8`, `v6e-1`)
names the generation when device nodes exist. `detect(root)` reads below `root`, so tests use directories
shaped like sysfs and /dev; `machine_tpu()` is this machine's answer, found once in a background thread that
`start()` begins when the server process starts.

Who holds a chip (`holders`) is read from /proc/*/fd: the process of another user is not readable, so an
empty answer does not prove the chip is free.
"""

from __future__ import annotations

import glob
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from compiler.ir.chips import CHIP_NAMES, canonical_name, get_chip
from compiler.tpu.local_chips import GOOGLE_PCI_VENDOR, PCI_DEVICE_CHIPS, local_chips, read_attr

FALLBACK_CHIP = "v7x"  # what kernels are compiled for on a machine without a TPU (the newest generation)


@dataclass(frozen=True)
class MachineTpu:
    """This machine's TPUs: their generation (a compiler.ir.chips name) and how many, or None and why not."""

    chip: str | None
    count: int = 0
    source: str = ""  # "pci" or "env" (TPU_ACCELERATOR_TYPE)
    device_files: tuple[str, ...] = ()
    why_none: str = ""

    @property
    def device_kind(self) -> str | None:
        """What jax calls the chip ("TPU v5 lite"), the words the editor shows."""
        return get_chip(self.chip).device_kind if self.chip else None

    def to_json(self) -> dict[str, object]:
        return {"chip": self.chip, "deviceKind": self.device_kind, "count": self.count, "source": self.source,
                "deviceFiles": list(self.device_files), "whyNone": self.why_none}


def device_files(root: str = "/") -> list[str]:
    """TPU device nodes below `root`: /dev/accelN (v4, v5p) or /dev/vfio/N (v5e and later)."""
    dev = os.path.join(root, "dev")
    found = glob.glob(os.path.join(dev, "accel*")) + [
        p for p in glob.glob(os.path.join(dev, "vfio", "*")) if os.path.basename(p).isdigit()
    ]
    return sorted(found)


def _pci_chips(root: str) -> tuple[list[str], list[str]]:
    """(chip names of Google TPU PCI functions, unknown Google device ids) under root/sys/bus/pci/devices."""
    chips: list[str] = []
    unknown: list[str] = []
    for device in sorted(glob.glob(os.path.join(root, "sys", "bus", "pci", "devices", "*"))):
        if read_attr(os.path.join(device, "vendor")) != GOOGLE_PCI_VENDOR:
            continue
        device_id = read_attr(os.path.join(device, "device"))
        if device_id in PCI_DEVICE_CHIPS:
            chips.append(PCI_DEVICE_CHIPS[device_id])
        elif device_id and device_id != "0x0027":  # 0x0027: TPU v2/v3, which Pallas TPU does not target
            unknown.append(device_id)
    return chips, unknown


def _accelerator_chip(accelerator_type: str) -> str | None:
    """`v5litepod-8` -> v5e, `v6e-1` -> v6e, `tpu7x-8` -> v7x; None for what no chip here is called."""
    name = accelerator_type.strip().lower().rsplit("-", 1)[0]
    try:
        chip = canonical_name(name)
    except ValueError:
        return None
    return chip if chip in CHIP_NAMES else None


def detect(root: str = "/", env: Mapping[str, str] | None = None) -> MachineTpu:
    """This machine's TPU as the files below `root` (and the environment `env`) describe it."""
    env = os.environ if env is None else env
    files = tuple(device_files(root))
    chips, unknown = _pci_chips(root)
    if chips:
        kinds = sorted(set(chips))
        if len(kinds) > 1:
            return MachineTpu(None, len(chips), "pci", files, f"TPUs of several generations ({', '.join(kinds)})")
        # the chips a process here can open, by the rule the tuner's per-chip workers use (a host may list
        # more functions on the bus than it passes through: 4 functions, 1 vfio group, 1 chip to JAX)
        return MachineTpu(kinds[0], local_chips(root, env).count or len(chips), "pci", files)
    accelerator = env.get("TPU_ACCELERATOR_TYPE", "")
    if files and accelerator:
        chip = _accelerator_chip(accelerator)
        if chip is not None:
            return MachineTpu(chip, len(files), "env", files)
        return MachineTpu(None, 0, "env", files, f"TPU_ACCELERATOR_TYPE={accelerator} names no known chip")
    if unknown:
        return MachineTpu(None, 0, "pci", files, f"a Google PCI device of unknown id {', '.join(unknown)}")
    if files:
        return MachineTpu(None, 0, "", files, "TPU device nodes but no TPU on the PCI bus that names its generation")
    return MachineTpu(None, why_none="no TPU here")


def holders(root: str = "/", files: tuple[str, ...] | list[str] = ()) -> dict[int, str]:
    """pid -> command line of the processes (readable by this user) that have one of `files` open: who holds
    the chip. Paths are compared as the processes see them (below `root` for tests)."""
    wanted = {os.path.join("/", os.path.relpath(f, root)) for f in files}
    found: dict[int, str] = {}
    for fd in glob.glob(os.path.join(root, "proc", "[0-9]*", "fd", "*")):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target in wanted:
            proc = os.path.dirname(os.path.dirname(fd))
            pid = int(os.path.basename(proc))
            cmdline = read_attr(os.path.join(proc, "cmdline")).replace("\0", " ").strip()
            found[pid] = cmdline or "?"
    return found


# -- this machine's answer, found once --------------------------------------------------------------------------
_found: MachineTpu | None = None
_lock = threading.Lock()
_thread: threading.Thread | None = None


def start() -> None:
    """Begin finding this machine's TPU in a daemon thread (idempotent)."""
    global _thread
    with _lock:
        if _thread is None and _found is None:
            _thread = threading.Thread(target=machine_tpu, name="helion-machine-tpu", daemon=True)
            _thread.start()


def machine_tpu() -> MachineTpu:
    """This machine's TPU (found on the first call; a few reads of sysfs)."""
    global _found
    if _found is None:
        found = detect()
        with _lock:
            _found = _found or found
    return _found


def default_chip() -> str:
    """The chip `helion.chip: auto` means: this machine's TPU generation, else FALLBACK_CHIP."""
    return machine_tpu().chip or FALLBACK_CHIP


def chip_note(chip: str, chosen: bool, machine: MachineTpu | None = None) -> str:
    """How the editor names the chip it compiles for and why its times are what they are:
    "TPU v5 lite (this machine)", "v7x (model: no TPU here)", "v7x (model: this machine has TPU v5 lite)"."""
    machine = machine or machine_tpu()
    if machine.chip == chip:
        return f"{machine.device_kind} (this machine)"
    if machine.chip is None:
        return f"{chip} (model: {machine.why_none})"
    return f"{chip} (model: {'helion.chip; ' if chosen else ''}this machine has {machine.device_kind})"
