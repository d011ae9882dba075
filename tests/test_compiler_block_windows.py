"""Fixed-length windows of a loaded block whose bounds are computed on the device (`blk[live - 3:live]` under
`if live >= 3`): read with a start clamped into the block, matching plain torch; windows that nothing proves
inside the block's live rows, or whose length is only known when the kernel runs, are refused on their line."""

import textwrap

import pytest
import torch

import compiler
from compiler import CompileError

HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"


def kernel(guard: str, window: str):
    source = f"""
    @helion.kernel(static_shapes=True)
    def tail_windows(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros([1, x.size(1)], dtype=x.dtype, device=x.device)
        for g in hl.grid(1):
            acc = hl.zeros([x.size(1)], dtype=torch.float32)
            for outer in hl.tile(x.size(0), block_size=4):
                blk = x[outer, :]
                live = outer.end - outer.begin
                {guard}
                    acc = acc + {window}.sum(dim=0)
            out[g, :] = acc
        return out
    """
    return next(iter(compiler.load(HEADER + textwrap.dedent(source)).kernels.values()))


@pytest.mark.parametrize("strategy", ["unroll", "fori_loop", "emit_pipeline"])
def test_window_at_the_end_of_the_live_rows_matches_torch(strategy):
    """9 rows in blocks of 4: rows 1..3 and 5..7 are summed; the last block (1 live row) skips the branch,
    whose clamped read runs anyway and is discarded."""
    x = torch.randn(9, 128)
    ck = kernel("if live >= 3:", "blk[live - 3:live, :]").compile(
        args="x=f32[9, 128]", config={"pallas_loop_type": strategy})
    out = ck(x.clone())
    torch.testing.assert_close(out, (x[1:4].sum(0) + x[5:8].sum(0)).unsqueeze(0), rtol=1e-5, atol=1e-5)
    assert "jnp.clip(live - 3, 0, 1)" in ck.source, ck.source


@pytest.mark.parametrize("guard, window, words", [
    ("if True:", "blk[live - 3:live, :]", "nothing proves it lies inside"),      # torch would shorten it
    ("if live >= 2:", "blk[live - 3:live, :]", "nothing proves it lies inside"),  # live == 2 wraps in torch
    ("if live >= 3:", "blk[live - 3:live + 1, :]", "nothing proves it lies inside"),  # past the live rows
    ("if live >= 1:", "blk[0:live, :]", "length known at compile time"),
    ("if live >= 3:", "blk[live - 3:live:2, :]", "length known at compile time"),
])
def test_windows_not_proven_inside_the_live_rows_are_refused(guard, window, words):
    with pytest.raises(CompileError) as info:
        kernel(guard, window).compile(args="x=f32[9, 128]")
    d = info.value.diagnostics[0]
    assert d.code == "HPL202" and words in d.message and d.range.start.line == 14, d


ROWS = """
    @helion.kernel(static_shapes=True)
    def live_rows(x: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for s in hl.grid(starts.size(0)):
            acc = hl.zeros([x.size(1), x.size(2)], dtype=torch.float32)
            for outer in hl.tile(starts[s], ends[s], block_size=4):
                blk = x[outer, :, :]
                live = outer.end - outer.begin
                for local in hl.tile(LIVE, block_size=1):
                    acc = acc * 0.5 + blk[local.begin, :, :]
                    out[outer.begin + local.begin, :, :] = acc
        return out
"""


def rows_kernel(live: str):
    source = HEADER + textwrap.dedent(ROWS).replace("LIVE", live)
    return next(iter(compiler.load(source).kernels.values()))


@pytest.mark.parametrize("strategy", ["unroll", "fori_loop", "emit_pipeline"])
def test_block_rows_at_the_live_row_loop_positions_match_torch(strategy):
    """Segments 2..7 and 7..12 of 12 rows in blocks of 4: blocks start off the block grid (and a last window
    would be clamped back inside the rows), so a row read relative to the window instead of `outer.begin`
    would show."""
    x = torch.randn(12, 2, 128)
    starts, ends = torch.tensor([2, 7], dtype=torch.int32), torch.tensor([7, 12], dtype=torch.int32)
    ck = rows_kernel("live").compile(args="x=f32[12, 2, 128], starts=i32[2], ends=i32[2]",
                                     config={"pallas_loop_type": strategy})
    out = ck(x.clone(), starts, ends)
    want = torch.zeros_like(x)
    for a, b in ((2, 7), (7, 12)):
        acc = torch.zeros(2, 128)
        for i in range(a, b):
            acc = acc * 0.5 + x[i]
            want[i] = acc
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    assert "x_ref[_wrap_index(outer_begin + local_begin, 12), :, :]" in ck.source, ck.source


def test_block_rows_past_the_live_rows_stay_refused():
    """`hl.tile(live + 1)` reaches one row past the block's live rows: nothing keeps it inside."""
    with pytest.raises(CompileError) as info:
        rows_kernel("live + 1").compile(args="x=f32[12, 2, 128], starts=i32[2], ends=i32[2]")
    d = info.value.diagnostics[0]
    assert d.code == "HPL106" and "cannot index a loaded block" in d.message and d.range.start.line == 14, d
