"""Names kernel files take from upstream Helion's helpers mean what they mean on a TPU (one table:
compiler/frontend/upstream_names.py): `helion._testing` constants and `helion.runtime.get_num_sm()`, which sizes a
persistent kernel's worker grid by the chip's TensorCores per device."""

import textwrap

import torch

import compiler
from compiler.frontend.upstream_names import UPSTREAM_NAMES, resolve

PERSISTENT = '''
import torch
import helion
import helion.language as hl


@helion.kernel(static_shapes=True)
def persistent_scale(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    workers = helion.runtime.get_num_sm(x.device)
    per_worker = helion.cdiv(m // 32, workers)
    for wid in hl.grid(workers):
        for i in hl.grid(per_worker):
            tid = i * workers + wid
            rows = tid * 32 + hl.arange(32)
            hl.store(out, [rows, slice(None)], hl.load(x, [rows, slice(None)]) * 2.0)
    return out
'''


def test_testing_names_mean_the_tpu():
    assert resolve("helion._testing.HALF_DTYPE") == torch.bfloat16
    assert resolve("helion._testing.LONG_INT_TYPE") == torch.int32
    assert set(UPSTREAM_NAMES) >= {"helion._testing.DEVICE", "helion._testing.HALF_DTYPE"}


def test_get_num_sm_is_the_chips_tensorcores():
    kernel = compiler.load(textwrap.dedent(PERSISTENT)).kernels["persistent_scale"]
    grids = {chip: kernel.compile(args="x=f32[256, 128]", chip=chip).plan.calls[0].grid for chip in ("v7x", "v5p")}
    assert grids["v7x"][0] == 1 and grids["v5p"][0] == 2  # megacore v5p: two TensorCores per device
    x = torch.randn(256, 128)
    torch.testing.assert_close(kernel.compile(args="x=f32[256, 128]", chip="v5p")(x), x * 2.0)
