"""Position tensors that address a block of a reshaped view (compiler/frontend/split_index.py): `x[m_blk, n_blk]`
with rows `tile.begin + hl.arange(...)` and columns `group * G + offset` reads a block of x.view(T, H / G, G) —
no gather, Mosaic-legal — and matches torch; forms that are not such a block are left to the gather path or
refused as before. The whole construct under every loop strategy: conformance cases `split_view_*`."""

import pytest
import torch

import compiler

SRC = '''
import torch
import helion
import helion.language as hl


@helion.kernel(static_shapes=True)
def group_scale(x: torch.Tensor, w: torch.Tensor, group: int) -> torch.Tensor:
    m, h = x.shape
    out = torch.empty_like(x)
    for tile_m in hl.tile(m, block_size=8):
        m_blk = (tile_m.begin + hl.arange(tile_m.block_size))[:, None, None]
        for tile_g, tile_n in hl.tile([h // group, group], block_size=[None, group]):
            n_blk = (tile_g.index[:, None] * group + tile_n.index[None, :])[None, :, :]
            v = x[m_blk, n_blk] * w[n_blk]
            out[m_blk, n_blk] = v / torch.amax(torch.abs(v), dim=-1, keepdim=True)
    return out


@helion.kernel(static_shapes=True)
def overlapping_runs(w: torch.Tensor) -> torch.Tensor:
    out = torch.empty([4, 128], dtype=w.dtype, device=w.device)
    for tile_g, tile_n in hl.tile([4, 128], block_size=[4, 128]):
        out[tile_g, tile_n] = w[tile_g.index[:, None] * 64 + tile_n.index[None, :]]
    return out


@helion.kernel(static_shapes=True)
def transposed_positions(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(1), x.size(0)], dtype=x.dtype, device=x.device)
    for ta, tb in hl.tile(out.size()):
        out[ta, tb] = x[tb.index[None, :], ta.index[:, None]]
    return out


@helion.kernel(static_shapes=True)
def rows_from_offsets(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for g in hl.grid(offsets.size(0) - 1):
        m_blk = (offsets[g] + hl.arange(8))[:, None, None]
        for tile_g, tile_n in hl.tile([4, 128], block_size=[4, 128]):
            n_blk = (tile_g.index[:, None] * 128 + tile_n.index[None, :])[None, :, :]
            out[m_blk, n_blk] = x[m_blk, n_blk] * 2.0
    return out


@helion.kernel(static_shapes=True)
def read_after_write(x: torch.Tensor, group: int) -> torch.Tensor:
    m, h = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m, block_size=8):
        m_blk = (tile_m.begin + hl.arange(tile_m.block_size))[:, None, None]
        for tile_g, tile_n in hl.tile([h // group, group], block_size=[None, group]):
            n_blk = (tile_g.index[:, None] * group + tile_n.index[None, :])[None, :, :]
            x[m_blk, n_blk] = x[m_blk, n_blk] * 2.0
        total = hl.zeros([tile_m], dtype=torch.float32)
        for tile_h in hl.tile(h):
            total = total + x[tile_m, tile_h].sum(dim=-1)
        out[tile_m] = total
    return out
'''


@pytest.fixture(scope="module")
def module():
    return compiler.load(SRC)


def test_two_position_tensors_read_and_write_a_view_block(module):
    x, w = torch.randn(16, 512), torch.randn(512)
    ck = module.kernels["group_scale"].compile(args="x=f32[16, 512], w=f32[512], group=128")
    v = (x * w).view(16, 4, 128)
    torch.testing.assert_close(ck(x, w, 128), (v / v.abs().amax(-1, keepdim=True)).view(16, 512))
    assert "x.reshape(16, 4, 128)" in ck.source and "w.reshape(4, 128)" in ck.source
    assert "_gather(" not in ck.source and "one_hot" not in ck.source
    assert ck.check_lowering() == [], ck.source


def test_positions_outside_a_factor_stay_a_gather(module):
    w = torch.randn(320)
    ck = module.kernels["overlapping_runs"].compile(args="w=f32[320]")
    expected = w[(torch.arange(4)[:, None] * 64 + torch.arange(128)[None, :])]
    torch.testing.assert_close(ck(w), expected)
    assert "w.reshape(" not in ck.source and "_gather(" in ck.source


def test_positions_that_need_a_transpose_read_a_block_and_transpose_it(module):
    """`x[tb.index[None, :], ta.index[:, None]]`: each position tensor varies along a dim of its own, so the block
    x[tb, ta] is read and transposed (compiler/frontend/broadcast_index.py; it was refused, HPL202)."""
    x = torch.randn(16, 128)
    ck = module.kernels["transposed_positions"].compile(args="x=f32[16, 128]")
    torch.testing.assert_close(ck(x), x.T)
    assert "_gather(" not in ck.source and "one_hot" not in ck.source


def test_rows_that_may_run_past_the_end_are_not_a_view_window(module):
    """Rows from a loaded offset may run past the tensor's end: a window read at a start clamped into the dim
    would shift them, so this is not read as a view block (two gathers: refused, never a wrong answer)."""
    with pytest.raises(compiler.CompileError) as info:
        module.kernels["rows_from_offsets"].compile(args="x=f32[20, 512], offsets=i32[3]")
    assert info.value.diagnostics[0].code == "HPL202"


def test_a_read_through_another_view_after_the_write_is_refused(module):
    """Reads through the plain tensor are allowed beside writes through its view only when they come first in
    the step (they see the values from before the writes): here a read follows the write, which the TPU
    pipeline cannot order (its block was fetched before the step)."""
    with pytest.raises(compiler.CompileError) as info:
        module.kernels["read_after_write"].compile(args="x=f32[16, 512], group=128")
    d = info.value.diagnostics[0]
    assert d.code == "HPL204" and "`x`" in d.message, d.message
