"""Loops whose bounds are computed on the device (`hl.tile(offsets[g], offsets[g + 1])`, `hl.tile(0, n[g])`):
a fori_loop with a dynamic trip count, a window per step clamped inside the arrays, positions outside the
step's range masked out of reductions, dots, carried values and stores; results match plain torch."""

import textwrap

import pytest
import torch
from test_checks_libtpu import libtpu

import compiler
from compiler import CompileError

HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"
STRATEGIES = ("unroll", "fori_loop", "emit_pipeline")


def kernel(source: str):
    return next(iter(compiler.load(HEADER + textwrap.dedent(source)).kernels.values()))


def run(k, args: str, inputs: list, config: dict):
    ck = k.compile(args=args, config=config)
    assert ck.check_lowering() == [], ck.source
    out = ck(*[t.clone() for t in inputs])
    return ck, out


SEGMENT_MAX = """
    @helion.kernel()
    def segment_max(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        out = torch.zeros([offsets.size(0) - 1, x.size(1)], dtype=x.dtype, device=x.device)
        for g in hl.grid(offsets.size(0) - 1):
            lo = offsets[g]
            hi = offsets[g + 1]
            best = hl.full([x.size(1)], float("-inf"), dtype=torch.float32)
            for t in hl.tile(lo, hi):
                best = torch.maximum(best, x[t, :].amax(dim=0))
            out[g, :] = best
        return out
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_segment_max_masks_rows_of_other_segments(strategy):
    """Segments of 5, 0, 14 and 21 rows in blocks of 8: windows overlap the neighbours' rows (and are clamped at
    the end of the 40 rows), which must not win the max; the empty segment keeps the initial -inf."""
    x = torch.randn(40, 128) - 10.0
    x[::7] += 20.0  # large rows in every segment, so a neighbour's row would show
    offsets = torch.tensor([0, 5, 5, 19, 40], dtype=torch.int32)
    ck, out = run(kernel(SEGMENT_MAX), "x=f32[40, 128], offsets=i32[5]", [x, offsets],
                  {"block_sizes": [8], "pallas_loop_type": strategy})
    want = torch.stack([x[a:b].amax(0) if b > a else torch.full((128,), float("-inf"))
                        for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)])
    torch.testing.assert_close(out, want)
    assert "pl.cdiv(hi - lo, 8)" in ck.source and "jnp.clip(t_begin, 0, 32)" in ck.source
    assert "x_ref[pl.ds(t_at, 8), :]" in ck.source  # f32 rows one lane tile wide: Mosaic addresses any start
    loop = next(lp for lp in ck.plan.loops if lp.kind == "inner")
    assert loop.strategy == "fori_loop" and loop.device_bounds == (True,)
    assert "computed on the device" in loop.note
    assert (f"`{strategy}` was asked for" in loop.note) == (strategy != "fori_loop")


SEGMENT_SCALE = """
    @helion.kernel()
    def segment_scale(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        for g in hl.grid(offsets.size(0) - 1):
            for t in hl.tile(offsets[g], offsets[g + 1]):
                x[t, :] = x[t, :] * 2.0 + 1.0
        return x
"""


def test_store_keeps_rows_outside_the_ranges():
    """Rows 0..2 and 21..31 lie in no segment: the masked stores keep their old values (x is updated in place)."""
    x = torch.randn(32, 128)
    offsets = torch.tensor([3, 10, 21], dtype=torch.int32)
    _, out = run(kernel(SEGMENT_SCALE), "x=f32[32, 128], offsets=i32[3]", [x, offsets],
                 {"block_sizes": [16], "pallas_loop_type": "fori_loop"})
    want = x.clone()
    want[3:21] = want[3:21] * 2.0 + 1.0
    torch.testing.assert_close(out, want)


PREFIX_DOT = """
    @helion.kernel()
    def prefix_gram(a: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        out = torch.empty([lengths.size(0), a.size(1), a.size(1)], dtype=torch.float32, device=a.device)
        for s in hl.grid(lengths.size(0)):
            acc = hl.zeros([a.size(1), a.size(1)], dtype=torch.float32)
            for t in hl.tile(0, lengths[s]):
                rows = a[t, :]
                acc = acc + torch.matmul(rows.transpose(0, 1), rows)
            out[s, :, :] = acc
        return out
"""


def test_dot_over_a_prefix_longer_block_than_rows():
    """The block (64) is longer than the 24 rows: the window is the whole dim; the dot contracts only the first
    lengths[s] rows; length 0 gives zeros."""
    a = torch.randn(24, 128)
    lengths = torch.tensor([24, 7, 0], dtype=torch.int32)
    ck, out = run(kernel(PREFIX_DOT), "a=f32[24, 128], lengths=i32[3]", [a, lengths],
                  {"block_sizes": [64], "pallas_loop_type": "fori_loop"})
    want = torch.stack([a[:n].T @ a[:n] for n in lengths.tolist()])
    torch.testing.assert_close(out, want, rtol=1e-3, atol=1e-3)
    assert "pl.ds(t_at, 24)" in ck.source and ck.plan.calls[0].operands[1].block_shape == (24, 128)


LIVE_ROWS = """
    @helion.kernel()
    def live_rows(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros([x.size(1)], dtype=x.dtype, device=x.device)
        for _ in hl.grid(1):
            acc = hl.zeros([x.size(1)], dtype=torch.float32)
            for outer in hl.tile(3, block_size=4):
                block = x[outer, :]
                live = outer.end - outer.begin
                for local in hl.tile(live, block_size=2):
                    acc = acc + block[local.index, :].sum(dim=0)
            out[:] = acc
        return out
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_positions_from_a_device_tile_index_gather_masked(strategy):
    """`block[local.index]` gathers rows at positions from a device-bounded tile: the gathered dim carries the
    tile, so its positions past `live` (row 3 of the 4 loaded) are masked out of the sum."""
    x = torch.randn(4, 128)
    x[3] += 1000.0  # the row past the live range would show
    ck, out = run(kernel(LIVE_ROWS), "x=f32[4, 128]", [x], {"pallas_loop_type": strategy})
    torch.testing.assert_close(out, x[:3].sum(0))
    assert "_gather(" in ck.source


def test_grid_bounds_on_the_device_are_refused():
    source = """
        @helion.kernel()
        def k(x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
            out = torch.zeros_like(x)
            for g in hl.grid(1):
                for r in hl.grid(n[g]):
                    out[r, :] = x[r, :]
            return out
    """
    with pytest.raises(CompileError) as info:
        kernel(source).compile(args="x=f32[8, 128], n=i32[1]")
    assert info.value.diagnostics[0].code == "HPL106" and "hl.grid bounds" in info.value.diagnostics[0].message


JAGGED_ROW_SUM = """
    @helion.kernel()
    def jagged_row_sum(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        b, _, d = x.size()
        out = torch.empty([b, d], dtype=x.dtype, device=x.device)
        for rows in hl.tile(b):
            acc = hl.zeros([rows, d], dtype=x.dtype)
            for k in hl.jagged_tile(lengths[rows, 0]):
                acc = acc + torch.exp(x[rows, k, :]).sum(dim=1)
            out[rows, :] = acc
        return out
"""


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_jagged_tile_masks_each_row_past_its_own_length(strategy):
    """`hl.jagged_tile(lengths[rows])`: 12 rows in tiles of 8 (the last tile half padding), each summing exp of
    its own prefix of 40 positions in blocks of 16; exp(0) = 1 would show if a row's tail were only zeroed at
    the load, and a padded row's garbage length must not stretch the loop."""
    x = torch.randn(12, 40, 128)
    lengths = torch.tensor([[0], [40], [7], [16], [17], [1], [39], [32], [3], [0], [25], [9]], dtype=torch.int32)
    ck, out = run(kernel(JAGGED_ROW_SUM), "x=f32[12, 40, 128], lengths=i32[12, 1]", [x, lengths],
                  {"block_sizes": [8, 16], "pallas_loop_type": strategy})
    want = torch.stack([x[r, :n].exp().sum(0) for r, (n,) in enumerate(lengths.tolist())])
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    assert "k_end = jnp.max(" in ck.source and "k_ends.reshape((8, 1, 1))" in ck.source
    loop = next(lp for lp in ck.plan.loops if lp.kind == "inner")
    assert loop.strategy == "fori_loop" and "`k` is jagged" in loop.note and "`rows`" in loop.note


@pytest.mark.parametrize("body, message", [
    ("acc = acc + x[k, 0, :].sum(dim=0)[None, :]", "jagged tile `k` but not along `rows`"),
    ("acc = acc + x[rows, k, :].mean(dim=1)", "mean over a jagged tile"),
])
def test_jagged_tile_refuses_what_it_cannot_mask(body, message):
    source = JAGGED_ROW_SUM.replace("acc = acc + torch.exp(x[rows, k, :]).sum(dim=1)", body)
    with pytest.raises(CompileError) as info:
        kernel(source).compile(args="x=f32[12, 40, 128], lengths=i32[12, 1]", config={"block_sizes": [8, 16]})
    d = info.value.diagnostics[0]
    assert d.code == "HPL106" and message in d.message and d.range.start.line == 12


def test_position_only_tiles_default_to_full_row_blocks():
    """A tile that indexes no tensor dim directly (its positions gather and scatter rows: grouped GEMM over jagged
    groups, jagged attention) defaults to a 128-row block, not one row per step."""
    source = """
        @helion.kernel()
        def grouped(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
            out = torch.zeros([a.size(0), b.size(1)], dtype=a.dtype, device=a.device)
            for g in hl.grid(offsets.size(0) - 1):
                start = offsets[g]
                for tile_m, tile_n in hl.tile([offsets[g + 1] - start, b.size(1)]):
                    acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
                    for tile_k in hl.tile(a.size(1)):
                        acc = torch.addmm(acc, a[start + tile_m.index, tile_k], b[tile_k, tile_n])
                    out[start + tile_m.index, tile_n] = acc
            return out
    """
    k = kernel(source)
    config = k.default_config("a=f32[300, 64], b=f32[64, 128], offsets=i32[4]")
    assert config["block_sizes"][0] == 128, config


def test_offsets_tile_of_a_short_vector_lowers():
    """`offsets[tile_b]` with 4 groups reads a 4-entry block of 5 offsets, a block no TPU can tile a 1-D array
    with: the whole vector stays in VMEM and each step slices its entries; the kernel lowers and is right."""
    source = """
        @helion.kernel(config=helion.Config(block_sizes=[4, 128, 16]))
        def jagged_sum(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
            out = torch.zeros([offsets.size(0) - 1, x.size(1)], dtype=x.dtype, device=x.device)
            for tile_b in hl.tile(offsets.size(0) - 1):
                starts = offsets[tile_b]
                nnz = offsets[tile_b.index + 1] - starts
                for tile_m in hl.tile(x.size(1)):
                    acc = hl.zeros([tile_b, tile_m], dtype=x.dtype)
                    for tile_k in hl.jagged_tile(nnz):
                        rows = starts[:, None] + tile_k.index[None, :]
                        acc = acc + x[rows, tile_m].sum(dim=1)
                    out[tile_b, tile_m] = acc
            return out
    """
    x = torch.randn(19, 128)
    offsets = torch.tensor([0, 3, 3, 12, 19], dtype=torch.int32)
    ck, out = run(kernel(source), "x=f32[19, 128], offsets=i32[5]", [x, offsets], {})
    want = torch.stack([x[a:b].sum(0) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)])
    torch.testing.assert_close(out, want)
    # entries 4t and 4t + 1 of a vector are lanes no TPU can prove 128-aligned: gathered from the whole vector
    assert "_gather(offsets_ref[...], tile_b * 4 + " in ck.source
    assert "_gather(offsets_ref[...], (tile_b * 4) + 1 + " in ck.source


def test_device_bounded_leading_rows_default_to_row_blocks():
    """A leading dim walked by a range computed on the device (`q[tile_q, :, :]` over one jagged sequence, as in
    upstream's jagged HSTU attention) defaults to blocks of many rows (cut to the dim), not one row per step."""
    source = """
        @helion.kernel()
        def seq_sum(q: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
            out = torch.zeros([offsets.size(0) - 1, q.size(1), q.size(2)], dtype=q.dtype, device=q.device)
            for g in hl.grid(offsets.size(0) - 1):
                acc = hl.zeros([q.size(1), q.size(2)], dtype=torch.float32)
                for tile_q in hl.tile(offsets[g], offsets[g + 1]):
                    acc = acc + q[tile_q, :, :].sum(dim=0)
                out[g, :, :] = acc
            return out
    """
    k = kernel(source)
    config = k.default_config("q=f32[300, 4, 128], offsets=i32[4]")
    assert config["block_sizes"][0] >= 128, config


CAUSAL_PREFIX = """
    @helion.kernel()
    def causal_prefix(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros([x.size(0)], dtype=x.dtype, device=x.device)
        for tq in hl.tile(x.size(0)):
            acc = hl.zeros([tq], dtype=torch.float32)
            for tk in hl.tile(0, tq.end):
                acc = acc + x[tq, tk].sum(dim=1)
            out[tq] = acc
        return out
"""


def unaligned_windows() -> list[tuple[str, str, list, dict, object]]:
    """(source, args, inputs, config, expected) of kernels whose windows start where only the device knows."""
    x = torch.randn(40, 256)  # two lane tiles: Mosaic shifts f32 rows at any start only within one
    offsets = torch.tensor([0, 5, 5, 19, 40], dtype=torch.int32)
    maxima = torch.stack([x[a:b].amax(0) if b > a else torch.full((256,), float("-inf"))
                          for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)])
    y = torch.randn(32, 256)
    scaled = y.clone()
    scaled[3:21] = scaled[3:21] * 2.0 + 1.0
    z = torch.randn(256, 256)
    return [
        (SEGMENT_MAX, "x=f32[40, 256], offsets=i32[5]", [x, offsets], {"block_sizes": [8]}, maxima),
        (SEGMENT_SCALE, "x=f32[32, 256], offsets=i32[3]", [y, torch.tensor([3, 10, 21], dtype=torch.int32)],
         {"block_sizes": [16]}, scaled),
        (CAUSAL_PREFIX, "x=f32[256, 256]", [z], {"block_sizes": [128, 128]}, torch.stack([z[i, : 128 * (i // 128 + 1)].sum() for i in range(256)])),
    ]


@pytest.mark.parametrize("case", range(3), ids=["segment_rows", "segment_store", "causal_prefix"])
def test_windows_at_device_offsets_are_read_as_the_tpu_can_address_them(case):
    """Mosaic addresses a window of a ref's last two dims at a start known only on the device when it can prove
    the start a multiple of the tiling (8 rows of f32, 128 lanes); it refuses the kernel otherwise (E2003, on
    the chip as in libtpu's deviceless compile). A segment's rows from device offsets are gathered and stored
    through the exact one-hot helpers; a prefix window at multiples of 128 keeps its slice with the hint."""
    source, args, inputs, config, want = unaligned_windows()[case]
    for strategy in STRATEGIES:
        ck, out = run(kernel(source), args, inputs, {**config, "pallas_loop_type": strategy})
        torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
        if case == 0:
            assert "_gather(x_ref[...], t_at + jax.lax.broadcasted_iota(jnp.int32, (8,), 0), axis=0)" in ck.source
        elif case == 1:
            assert "x_out_ref[...] = _scatter(x_out_ref[...], t_at + " in ck.source
        else:
            assert "pl.multiple_of(jnp.clip(tk_begin, 0, 128), 128)" in ck.source and "_gather" not in ck.source


@libtpu
@pytest.mark.parametrize("case", range(3), ids=["segment_rows", "segment_store", "causal_prefix"])
def test_windows_at_device_offsets_compile_for_the_chip(case):
    """What the chip's compiler said before (E2003 for each of these) its deviceless compile no longer says."""
    source, args, _, config, _ = unaligned_windows()[case]
    for strategy in STRATEGIES:
        ck = kernel(source).compile(args=args, config={**config, "pallas_loop_type": strategy}, chip="v5e")
        assert [d.message for d in ck.check_tpu_compile() if d.is_error] == [], ck.source
