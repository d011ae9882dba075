"""A registered block size larger than the extent it tiles (upstream's longsum_manual pins 32768 for a row of a
few thousand): the tile covers the extent once and `hl.zeros([tile_m, block])` is as wide as that tile."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4, 3000])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8192, 1]))
def wide_row_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    block_n = hl.register_block_size(n)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, block_n], dtype=x.dtype)
        for tile_n in hl.tile(n, block_size=block_n):
            acc += x[tile_m, tile_n]
        out[tile_m] = acc.sum(-1)
    return out


def reference(x):
    return x.sum(-1)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-4}
