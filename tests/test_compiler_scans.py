"""`torch.cumsum` / `cumprod`: a log-step scan with pltpu.roll (jnp.cumsum has no Mosaic lowering), masked
where its dim holds positions outside the range (a device-bounded window starts before its step's rows)."""

import textwrap

import pytest
import torch

import compiler

HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"

SEGMENT_CUMSUM = """
    @helion.kernel()
    def segment_cumsum(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for g in hl.grid(offsets.size(0) - 1):
            lo = offsets[g]
            hi = offsets[g + 1]
            above = hl.zeros([x.size(1)], dtype=torch.float32)
            for t in hl.tile(lo, hi):
                block = x[t, :]
                out[t, :] = torch.cumsum(block, dim=0) + above[None, :]
                above = above + block.sum(dim=0)
        return out
"""


def kernel(source: str):
    return next(iter(compiler.load(HEADER + textwrap.dedent(source)).kernels.values()))


@pytest.mark.parametrize("strategy", ["unroll", "fori_loop"])
def test_segment_cumsum_restarts_at_each_segment(strategy):
    """Segments of 5, 0, 14 and 21 rows in blocks of 8: a window clamped at the end of the 40 rows starts inside
    the previous segment, whose rows must not enter the running sum."""
    x = torch.randn(40, 128)
    offsets = torch.tensor([0, 5, 5, 19, 40], dtype=torch.int32)
    ck = kernel(SEGMENT_CUMSUM).compile(args="x=f32[40, 128], offsets=i32[5]",
                                        config={"block_sizes": [8], "pallas_loop_type": strategy})
    assert ck.check_lowering() == [], ck.source
    out = ck(x.clone(), offsets)
    want = torch.cat([x[a:b].cumsum(0) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)])
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    assert "_prefix(jnp.where(" in ck.source and "pltpu.roll(" in ck.source


def test_cumprod_along_lanes_lowers_and_matches():
    source = """
        @helion.kernel()
        def running_product(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tm in hl.tile(x.size(0)):
                out[tm, :] = torch.cumprod(x[tm, :], dim=1)
            return out
    """
    x = 1.0 + 0.01 * torch.randn(16, 256)
    ck = kernel(source).compile(args="x=f32[16, 256]", config={"block_sizes": [8]})
    assert ck.check_lowering() == [], ck.source
    torch.testing.assert_close(ck(x.clone()), x.cumprod(1), rtol=1e-4, atol=1e-5)
