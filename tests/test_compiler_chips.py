"""The chip table: its copy of jax's per-TensorCore figures equals the installed jax's, and reading it
does not import jax (which cost a cold language server's first compile ~0.5 s)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from compiler.ir.chips import _JAX_CHIPS, _JAX_TPU_INFO, CHIP_NAMES, get_chip


@pytest.mark.parametrize("name", CHIP_NAMES)
def test_copied_figures_equal_jaxs_own(name: str):
    tpu_info = pytest.importorskip("jax._src.pallas.mosaic.tpu_info")
    version, cores, _ = _JAX_CHIPS[name]
    info = tpu_info.get_tpu_info_for_chip(tpu_info.ChipVersion(version), cores)
    assert _JAX_TPU_INFO[name] == {field: getattr(info, field) for field in _JAX_TPU_INFO[name]}
    chip = get_chip(name)
    assert (chip.vmem_capacity_bytes, chip.hbm_bandwidth, chip.bf16_flops, chip.num_mxus) == (
        info.vmem_capacity_bytes, info.mem_bw_bytes_per_second, info.bf16_ops_per_second, info.num_mxus
    )


def test_reading_a_chip_does_not_import_jax():
    code = "import sys; from compiler.ir.chips import get_chip; get_chip('v7x'); print('jax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
