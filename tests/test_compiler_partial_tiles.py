"""Blocks that do not divide their loop's range: the last block is partial, its padding is masked out of
reductions and dots, and results match plain torch for every loop strategy (and lower for TPU)."""

import math
import textwrap

import pytest
import torch
from conftest import EXAMPLES, MORE_KERNELS

import compiler
from compiler import CompileError

HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"
STRATEGIES = ("unroll", "fori_loop", "emit_pipeline")


def kernel(source: str, name: str | None = None):
    module = compiler.load(HEADER + textwrap.dedent(source) if "import" not in source else source)
    return module.kernels[name] if name else next(iter(module.kernels.values()))


def run(k, args: str, inputs: list, config: dict):
    ck = k.compile(args=args, config=config)
    assert ck.check_lowering() == [], ck.source
    out = ck(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])
    return ck, out


INNER_SUM = """
    @helion.kernel()
    def row_sums(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
        for tm in hl.tile(x.size(0)):
            acc = hl.zeros([tm], dtype=torch.float32)
            for tn in hl.tile(x.size(1)):
                acc = acc + x[tm, tn].sum(-1)
            out[tm] = acc
        return out
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_inner_partial_tile_sum(strategy):
    """384 columns in blocks of 256: the second block is half padding, which must not reach the sums."""
    x = torch.randn(64, 384)
    ck, out = run(kernel(INNER_SUM), "x=f32[64, 384]", [x], {"block_sizes": [64, 256], "pallas_loop_type": strategy})
    torch.testing.assert_close(out, x.sum(-1), rtol=1e-4, atol=1e-4)
    assert "broadcasted_iota" in ck.source
    if strategy != "emit_pipeline":  # the resident block is padded to whole blocks: 384 -> 512
        assert ck.plan.calls[0].operands[0].block_shape == (64, 512)
        assert any(r.block_shape == (64, 512) for r in ck.vmem.rows)
    loop = next(lp for lp in ck.plan.loops if lp.kind == "inner")
    assert loop.tails == (128,) and loop.tail_notes() == ["masked tail: 384 = 1×256 + 128"]


def test_dividing_blocks_get_no_mask():
    x = torch.randn(64, 512)
    ck, out = run(kernel(INNER_SUM), "x=f32[64, 512]", [x], {"block_sizes": [64, 256], "pallas_loop_type": "unroll"})
    torch.testing.assert_close(out, x.sum(-1), rtol=1e-4, atol=1e-4)
    assert "jnp.where" not in ck.source and ck.plan.calls[0].operands[0].block_shape == (64, 512)
    assert all(not any(lp.tails) for lp in ck.plan.loops)


def test_mask_is_counted_as_vector_work():
    masked = kernel(INNER_SUM).compile(args="x=f32[64, 384]", config={"block_sizes": [64, 256]})
    plain = kernel(INNER_SUM).compile(args="x=f32[64, 512]", config={"block_sizes": [64, 256]})
    # the same 256-wide block per iteration; the partial one also builds and applies its mask
    assert masked.plan.calls[0].inner_loops[0].work.vpu_elems > plain.plan.calls[0].inner_loops[0].work.vpu_elems


GRID_STATS = """
    @helion.kernel()
    def block_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        m, n = x.size()
        bm = hl.register_block_size(m)
        sums = torch.empty([helion.cdiv(m, bm), n], dtype=x.dtype, device=x.device)
        maxes = torch.empty_like(sums)
        means = torch.empty_like(sums)
        firsts = torch.empty_like(sums)
        for tm in hl.tile(m, block_size=bm):
            blk = x[tm, :]
            sums[tm.id, :] = blk.sum(0)
            maxes[tm.id, :] = torch.amax(blk, 0)
            means[tm.id, :] = blk.mean(0)
            firsts[tm.id, :] = torch.argmin(blk, 0).to(x.dtype)
        return sums, maxes, means, firsts
"""


def test_partial_grid_tile_reductions():
    """Reductions over a partial launch-grid tile: sum (0), max (-inf), mean (valid count), argmin (+inf)."""
    x = torch.randn(1000, 256) - 5.0  # all negative: padding read as 0 would win every max
    ck, (sums, maxes, means, firsts) = run(kernel(GRID_STATS), "x=f32[1000, 256]", [x], {"block_sizes": [128]})
    chunks = x.split(128)  # 7 x 128 + 104
    torch.testing.assert_close(sums, torch.stack([c.sum(0) for c in chunks]), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(maxes, torch.stack([c.amax(0) for c in chunks]))
    torch.testing.assert_close(means, torch.stack([c.mean(0) for c in chunks]), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(firsts, torch.stack([c.argmin(0).float() for c in chunks]))
    grid = next(lp for lp in ck.plan.loops if lp.kind == "grid")
    assert grid.tail_notes() == ["masked tail: 1000 = 7×128 + 104"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_softmax_1000_by_3000(strategy):
    """Row blocks of 512 over 1000 rows and column blocks of 1024 over 3000: both tails are partial."""
    k = kernel((MORE_KERNELS / "softmax_two_pass.py").read_text(), "softmax_two_pass")
    x = torch.randn(1000, 3000)
    _, out = run(k, "x=f32[1000, 3000]", [x], {"block_sizes": [512, 1024], "pallas_loop_type": strategy})
    torch.testing.assert_close(out, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


def test_softmax_1000_by_3000_default_config():
    k = kernel((EXAMPLES / "softmax.py").read_text(), "softmax")
    x = torch.randn(1000, 3000)
    ck, out = run(k, "x=f32[1000, 3000]", [x], {})
    assert 1000 % ck.config["block_sizes"][0]
    torch.testing.assert_close(out, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_attention_sequence_1000(strategy):
    """Queries and keys of length 1000 in blocks of 256: masked scores (max, sum) and a masked P @ V."""
    k = kernel((EXAMPLES / "attention.py").read_text(), "attention")
    q, kk, v = (torch.randn(1, 2, 1000, 128) for _ in range(3))
    args = "q=f32[1, 2, 1000, 128], k=f32[1, 2, 1000, 128], v=f32[1, 2, 1000, 128]"
    ck, out = run(k, args, [q, kk, v], {"block_sizes": [2, 256, 256], "pallas_loop_type": strategy})
    expected = torch.softmax(q @ kk.transpose(-1, -2) / math.sqrt(128), dim=-1) @ v
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    assert any(lp.kind == "inner" and lp.tails == (232,) for lp in ck.plan.loops)


BMM = """
    @helion.kernel()
    def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        nb, m, k = a.size()
        _, _, n = b.size()
        out = torch.empty([nb, m, n], device=a.device, dtype=torch.float32)
        for tb, tm, tn in hl.tile([nb, m, n]):
            acc = hl.zeros([tb, tm, tn], dtype=torch.float32)
            for tk in hl.tile(k):
                acc = torch.baddbmm(acc, a[tb, tm, tk], b[tb, tk, tn])
            out[tb, tm, tn] = acc
        return out
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_bmm_k_384_block_256(strategy):
    """The contraction dim is partial: both operands are masked to 0 (0 * NaN padding would still be NaN)."""
    a, b = torch.randn(2, 128, 384), torch.randn(2, 384, 128)
    ck, out = run(kernel(BMM), "a=f32[2, 128, 384], b=f32[2, 384, 128]", [a, b],
                  {"block_sizes": [2, 128, 128, 256], "pallas_loop_type": strategy})
    torch.testing.assert_close(out, torch.bmm(a, b), rtol=1e-4, atol=1e-3)
    assert ck.source.count("jnp.where(") == 2


OFFSET_SUM = """
    @helion.kernel()
    def offset_sum(data: torch.Tensor) -> torch.Tensor:
        out = torch.zeros([2, data.size(1)], dtype=data.dtype, device=data.device)
        for g in hl.grid(2):
            acc = hl.zeros([data.size(1)], dtype=torch.float32)
            for t in hl.tile(3, data.size(0), block_size=16):
                acc = acc + data[t, :].sum(0)
            out[g, :] = acc
        return out
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_non_zero_non_aligned_begin(strategy):
    """hl.tile(3, 128) in blocks of 16: every block starts off the block grid and the last one runs past."""
    data = torch.randn(128, 256)
    ck, out = run(kernel(OFFSET_SUM), "data=f32[128, 256]", [data], {"pallas_loop_type": strategy})
    torch.testing.assert_close(out, data[3:].sum(0).expand(2, 256), rtol=1e-4, atol=1e-4)
    # the resident block covers 3 + 8 * 16 = 131 rows, padded to the sublane tile: 136
    assert ck.plan.calls[0].operands[0].block_shape == (136, 256)
    assert next(lp for lp in ck.plan.loops if lp.kind == "inner").tail_notes() == [
        "masked tail: 125 (3..128) = 7×16 + 13"]


SUB_TILES = """
    @helion.kernel()
    def decayed_row_sums(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        bm = hl.register_block_size(m)
        out = torch.empty([helion.cdiv(m, bm), n], dtype=x.dtype, device=x.device)
        scaled = torch.empty_like(x)
        for tm in hl.tile(m, block_size=bm):
            acc = hl.zeros([n], dtype=torch.float32)
            for ts in hl.tile(tm.begin, tm.end, block_size=8):
                scaled[ts, :] = x[ts, :] * 2.0
                acc = acc * 0.5 + x[ts, :].sum(0)
            out[tm.id, :] = acc
        return out, scaled
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_sub_tiles_of_a_partial_grid_tile(strategy):
    """70 rows in grid blocks of 32: the last block has 6 rows, so three of its four sub-tiles lie wholly past
    the end and must not run (the decay would count them), and the first is masked."""
    x = torch.randn(70, 128)
    ck, (out, scaled) = run(kernel(SUB_TILES), "x=f32[70, 128]", [x], {"block_sizes": [32], "pallas_loop_type": strategy})
    expected = []
    for block in x.split(32):
        acc = torch.zeros(128)
        for rows in block.split(8):
            acc = acc * 0.5 + rows.sum(0)
        expected.append(acc)
    torch.testing.assert_close(out, torch.stack(expected), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(scaled, x * 2.0)


ADD_3D = """
    @helion.kernel()
    def add3d(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        b, m, n = x.size()
        out = torch.empty_like(x)
        for tb in hl.tile(b):
            for tm, tn in hl.tile([m, n]):
                out[tb, tm, tn] = x[tb, tm, tn] + y[tb, tm, tn]
        return out
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_partial_inner_dims(strategy):
    """[70, 130] in (8, 128) blocks; emit_pipeline cannot fetch past an unaligned array end, so the loop
    slices those operands resident in VMEM instead."""
    x, y = torch.randn(4, 70, 130), torch.randn(4, 70, 130)
    ck, out = run(kernel(ADD_3D), "x=f32[4, 70, 130], y=f32[4, 70, 130]", [x, y],
                  {"block_sizes": [1, 8, 128], "pallas_loop_type": strategy})
    torch.testing.assert_close(out, x + y)
    assert all(o.memory == "resident" and o.block_shape == (1, 72, 256) for o in ck.plan.calls[0].operands)


def test_block_larger_than_the_range_is_the_whole_range():
    """A size-1 dim broadcasts against a tile whose block (16) is larger than its range (10)."""
    k = kernel("""
        @helion.kernel()
        def k(x: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> None:
            for tm, tn in hl.tile(out.size()):
                out[tm, tn] = x[tm, tn] + bias[tn]
    """)
    x, bias, out = torch.randn(10, 1), torch.randn(10), torch.zeros(10, 10)
    ck = k.compile(args="x=f32[10, 1], bias=f32[10], out=f32[10, 10]", config={"block_sizes": [16, 16]})
    assert ck.check_lowering() == []
    ck(x, bias, out)
    torch.testing.assert_close(out, x + bias[None, :])


def test_reshape_across_a_partial_tile_is_diagnosed():
    """Merging a partial dim scatters its padding; a sum over the merged dim cannot be masked: say so."""
    with pytest.raises(CompileError) as info:
        kernel("""
            @helion.kernel()
            def k(x: torch.Tensor) -> torch.Tensor:
                out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
                for tm in hl.tile(x.size(0)):
                    out[tm] = x[tm, :].reshape([-1]).sum().expand([tm])
                return out
        """).compile(args="x=f32[100, 128]", config={"block_sizes": [64]})
    d = info.value.diagnostics[0]
    assert d.code == "HPL210" and "sum" in d.message and d.range.start.line == 9


def test_store_of_a_partial_tile_into_other_positions_is_diagnosed():
    with pytest.raises(CompileError) as info:
        kernel("""
            @helion.kernel()
            def k(x: torch.Tensor) -> torch.Tensor:
                out = torch.empty([64, 128], dtype=x.dtype, device=x.device)
                for tm in hl.tile(x.size(0), block_size=64):
                    out[:, :] = x[tm, :]
                return out
        """).compile(args="x=f32[100, 128]")
    d = info.value.diagnostics[0]
    assert d.code == "HPL210" and "`tm`" in d.message and d.range.start.line == 9


def test_launch_grid_tile_off_its_block_grid_is_diagnosed():
    """Inner loops may start anywhere; a launch-grid BlockSpec can only index whole blocks: say so."""
    with pytest.raises(CompileError) as info:
        kernel("""
            @helion.kernel()
            def k(x: torch.Tensor) -> torch.Tensor:
                out = torch.zeros_like(x)
                for t in hl.tile(3, x.size(0), block_size=16):
                    out[t, :] = x[t, :] + 1.0
                return out
        """).compile(args="x=f32[128, 256]")
    d = info.value.diagnostics[0]
    assert d.code == "HPL202" and "starts at 3" in d.message and d.range.start.line == 9
