"""Finding this machine's TPU from what the OS says (helion_ls/workers/machine_tpu.py), in directories shaped like
sysfs, /dev and /proc: no jax, no chip claimed."""

from __future__ import annotations

import os
from pathlib import Path

from helion_ls.session.settings import Settings, parse_settings
from helion_ls.workers.machine_tpu import (
    FALLBACK_CHIP,
    MachineTpu,
    chip_note,
    default_chip,
    detect,
    holders,
    machine_tpu,
)


def pci(root: Path, slot: str, vendor: str, device: str) -> None:
    d = root / "sys" / "bus" / "pci" / "devices" / slot
    d.mkdir(parents=True)
    (d / "vendor").write_text(vendor + "\n")
    (d / "device").write_text(device + "\n")
    (d / "subsystem_device").write_text("0x0000\n")


def dev(root: Path, *names: str) -> None:
    for name in names:
        path = root / "dev" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")


def test_a_v5e_vm_with_one_chip(tmp_path):
    pci(tmp_path, "0000:00:04.0", "0x1ae0", "0x0063")
    pci(tmp_path, "0000:00:05.0", "0x1af4", "0x1000")  # a virtio NIC beside it
    dev(tmp_path, "vfio/0", "vfio/vfio")
    found = detect(str(tmp_path), env={})
    assert (found.chip, found.count, found.source) == ("v5e", 1, "pci")
    assert found.device_kind == "TPU v5 lite"
    assert found.device_files == (str(tmp_path / "dev" / "vfio" / "0"),)  # not the vfio container node


def test_a_sandbox_given_one_of_four_chips_counts_the_one_it_can_open(tmp_path):
    """What the lent TPU v5e machine showed (bench/chip/v5e_host_probe.txt): four v5e functions on the PCI bus,
    one vfio group passed through, and jax saw one device."""
    for slot in ("08", "09", "0a", "0b"):
        pci(tmp_path, f"0000:00:{slot}.0", "0x1ae0", "0x0063")
    dev(tmp_path, "vfio/1", "vfio/vfio")
    found = detect(str(tmp_path), env={"TPU_ACCELERATOR_TYPE": "v5litepod-4"})
    assert (found.chip, found.count, found.source) == ("v5e", 1, "pci")


def test_every_generation_by_its_pci_id_and_chip_count(tmp_path):
    for device, chip in (("0x005e", "v4"), ("0x0062", "v5p"), ("0x0063", "v5e"), ("0x006f", "v6e"),
                         ("0x0076", "v7x")):
        root = tmp_path / chip
        for i in range(4):
            pci(root, f"0000:00:0{i}.0", "0x1ae0", device)
        found = detect(str(root), env={})
        assert (found.chip, found.count) == (chip, 4)


def test_no_tpu_says_why(tmp_path):
    pci(tmp_path, "0000:00:05.0", "0x1af4", "0x1000")
    found = detect(str(tmp_path), env={"TPU_ACCELERATOR_TYPE": "v5litepod-1"})  # env alone is not a chip
    assert found.chip is None and found.why_none == "no TPU here"
    assert chip_note("v7x", False, found) == "v7x (model: no TPU here)"


def test_accelerator_type_names_the_chip_when_sysfs_shows_no_pci(tmp_path):
    dev(tmp_path, "vfio/0", "vfio/1", "vfio/2", "vfio/3")
    for accelerator, chip in (("v5litepod-4", "v5e"), ("v6e-4", "v6e"), ("v5p-8", "v5p"), ("tpu7x-8", "v7x")):
        found = detect(str(tmp_path), env={"TPU_ACCELERATOR_TYPE": accelerator})
        assert (found.chip, found.count, found.source) == (chip, 4, "env")
    odd = detect(str(tmp_path), env={"TPU_ACCELERATOR_TYPE": "v9z-1"})
    assert odd.chip is None and "v9z-1" in odd.why_none
    bare = detect(str(tmp_path), env={})
    assert bare.chip is None and "device nodes" in bare.why_none


def test_unknown_google_device_is_named(tmp_path):
    pci(tmp_path, "0000:00:04.0", "0x1ae0", "0x00ff")
    found = detect(str(tmp_path), env={})
    assert found.chip is None and "0x00ff" in found.why_none


def test_chip_note_says_whose_chip_it_is():
    v5e = MachineTpu("v5e", 1, "pci")
    assert chip_note("v5e", False, v5e) == "TPU v5 lite (this machine)"
    assert chip_note("v5e", True, v5e) == "TPU v5 lite (this machine)"
    assert chip_note("v7x", True, v5e) == "v7x (model: helion.chip; this machine has TPU v5 lite)"


def test_holders_reads_open_device_nodes(tmp_path):
    dev(tmp_path, "vfio/0")
    fd = tmp_path / "proc" / "4242" / "fd"
    fd.mkdir(parents=True)
    (tmp_path / "proc" / "4242" / "cmdline").write_bytes(b"python\0train.py\0")
    os.symlink("/dev/vfio/0", fd / "7")
    os.symlink("/dev/null", fd / "1")
    other = tmp_path / "proc" / "77" / "fd"
    other.mkdir(parents=True)
    os.symlink("/dev/null", other / "0")
    found = holders(str(tmp_path), [str(tmp_path / "dev" / "vfio" / "0")])
    assert found == {4242: "python train.py"}


def test_auto_is_the_default_and_means_this_machine():
    """The default chip is this machine's TPU generation, or v7x without one; naming a chip is a choice."""
    assert default_chip() == (machine_tpu().chip or FALLBACK_CHIP)
    auto, problems = parse_settings({"chip": "auto"})
    assert problems == [] and auto == Settings() and auto.chip == default_chip() and not auto.chip_chosen
    named, problems = parse_settings({"chip": "v5e"})
    assert problems == [] and (named.chip, named.chip_chosen) == ("v5e", True)
