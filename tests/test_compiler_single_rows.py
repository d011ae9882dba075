"""Launch-grid tiles of one row (`hl.tile(tokens, block_size=1)`, vLLM's per-token kernels): a (1, n) block of an
[m, n] tensor is not Mosaic-legal, so the access reads row `tile.id` of the tensor's [m, 1, n] view (block
(squeezed, 1, n)); the kernel body is unchanged, the results match torch and the module lowers."""

import torch

import compiler

SRC = '''
import torch
import helion
import helion.language as hl


@helion.kernel(static_shapes=True)
def row_scale(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    m, n = x.shape
    for tile_m in hl.tile(m, block_size=1):
        peak = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n):
            peak = torch.maximum(peak, torch.amax(torch.abs(x[tile_m, tile_n]), dim=-1))
        scale[tile_m, 0] = peak
        for tile_n in hl.tile(n):
            out[tile_m, tile_n] = x[tile_m, tile_n] / peak[:, None]
    return out
'''


def test_one_row_tiles_read_rows_of_a_unit_dim_view():
    kernel = compiler.load(SRC).kernels["row_scale"]
    x, scale = torch.randn(16, 256), torch.zeros(16, 1)
    ck = kernel.compile(args="x=f32[16, 256], scale=f32[16, 1]")
    out = ck(x, scale)
    peak = x.abs().amax(dim=-1, keepdim=True)
    torch.testing.assert_close(out, x / peak)
    torch.testing.assert_close(scale, peak)
    assert "x.reshape(16, 1, 256)" in ck.source and "scale.reshape(16, 1, 1)" in ck.source
    assert ck.check_lowering() == [], ck.source


SUBTILE_SRC = '''
import torch
import helion
import helion.language as hl


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32]))
def centred(x: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for rows in hl.tile(x.size(0)):
        for sub in hl.tile(rows.begin, rows.end):
            out[sub, :] = x[sub, :] - mean[sub][:, None]
    return out
'''


def test_a_sub_tile_that_is_its_tiles_one_block_reads_rows_of_a_1d_view():
    """Upstream layer_norm_bwd's `mean[mb]` under `for mb in hl.tile(mb_cta.begin, mb_cta.end)` with 32-row blocks:
    a (32,) block of a 1-D tensor is not Mosaic-legal, so the read takes row `rows.id` of the [n / 32, 32] view."""
    kernel = compiler.load(SUBTILE_SRC).kernels["centred"]
    ck = kernel.compile(args="x=f32[256, 128], mean=f32[256]")
    x, mean = torch.randn(256, 128), torch.randn(256)
    torch.testing.assert_close(ck(x, mean), x - mean[:, None])
    assert "mean.reshape(8, 32)" in ck.source, ck.source
    assert ck.check_lowering() == [], ck.source
