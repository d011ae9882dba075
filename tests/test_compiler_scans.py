"""`torch.cumsum` / `cumprod` and `hl.cumsum` / `hl.cumprod`: a log-step scan with pltpu.roll (jnp.cumsum has no
Mosaic lowering), masked where its dim holds positions outside the range (a device-bounded window starts before its
step's rows; a reverse scan's ragged last tile holds them before its valid positions)."""

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


HL_SCAN = """
    @helion.kernel()
    def scan(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tm, tn in hl.tile(x.size()):
            out[tm, tn] = hl.{fn}(x[tm, tn], {dim}, reverse={reverse})
        return out
"""


def _blockwise(x: torch.Tensor, fn, dim: int, block: int, reverse: bool) -> torch.Tensor:
    """Plain torch: the scan restarts at every block of `dim` (each tile scans its own block)."""
    parts = [x.narrow(dim, s, min(block, x.size(dim) - s)) for s in range(0, x.size(dim), block)]
    return torch.cat([fn(p.flip(dim), dim).flip(dim) if reverse else fn(p, dim) for p in parts], dim)


@pytest.mark.parametrize(("fn", "dim", "reverse", "dtype"), [
    ("cumsum", 1, True, torch.float32),   # lanes, from the end: the ragged last tile (300 = 2 * 128 + 44)
    ("cumsum", 0, True, torch.float32),   # sublanes, from the end: 100 rows in blocks of 64
    ("cumprod", 1, True, torch.float32),
    ("cumsum", 1, False, torch.int32),    # hl.cumsum keeps int32 (torch.cumsum would give int64)
    ("cumsum", 0, True, torch.bfloat16),
])
def test_hl_scan_matches_plain_torch_on_ragged_tiles(fn, dim, reverse, dtype):
    source = HL_SCAN.format(fn=fn, dim=dim, reverse=reverse)
    ck = kernel(source).compile(args=f"x={str(dtype).removeprefix('torch.')}[100, 300]",
                                config={"block_sizes": [64, 128]})
    assert ck.check_lowering() == [], ck.source
    if dtype == torch.int32:
        x = torch.randint(-3, 4, (100, 300), dtype=dtype)
    else:
        x = (0.9 + 0.2 * torch.rand(100, 300)).to(dtype)
    got = ck(x.clone())
    assert got.dtype == dtype
    want = _blockwise(x.double(), getattr(torch, fn), dim, 64 if dim == 0 else 128, reverse)
    tolerance = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.int32: 0}[dtype]
    torch.testing.assert_close(got.double(), want, rtol=tolerance, atol=tolerance * want.abs().max().item())
    assert ("_suffix(" if reverse else "_prefix(") in ck.source


def test_hl_scan_eager_reference_matches_plain_torch():
    from compiler.reference import run_reference

    source = HEADER + textwrap.dedent(HL_SCAN.format(fn="cumsum", dim=1, reverse=True))
    x = torch.randn(100, 300)
    got = run_reference(source, "scan", [x], block_sizes=[64, 128])
    torch.testing.assert_close(got, _blockwise(x, torch.cumsum, 1, 128, True), rtol=1e-5, atol=1e-5)


def test_hl_scan_reverse_must_be_a_constant():
    source = """
        @helion.kernel()
        def scan(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tm in hl.tile(x.size(0)):
                out[tm, :] = hl.cumsum(x[tm, :], 1, reverse=x[tm, :].sum() > 0)
            return out
    """
    with pytest.raises(compiler.CompileError, match="reverse must be a constant"):
        kernel(source).compile(args="x=f32[16, 128]")
