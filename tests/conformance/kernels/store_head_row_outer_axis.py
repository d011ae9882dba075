"""A store at one head (`tile_h.begin`) of a `[B, S, H, D]` output, with the head axis first in a multi-dim
`hl.tile` (Mamba2 chunk scan): the head dim is one of the two TPU-tiled dims, so the block holds every head and
each step writes its row; the head axis runs innermost so each block's visits are consecutive, while the other
axes, which the block does follow, stay parallel."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[2, 64, 4, 128], scale=f32[4])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[1, 32, 128, 1]))
def per_head_scale(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    batch, seq, heads, dim = x.shape
    out = torch.empty_like(x)
    for tile_h, tile_m, tile_n, tile_b in hl.tile([heads, seq, dim, batch], block_size=[1, None, None, 1]):
        s = scale[tile_h.begin]
        out[tile_b.begin, tile_m, tile_h.begin, tile_n] = x[tile_b.begin, tile_m, tile_h.begin, tile_n] * s
    return out


def reference(x, scale):
    return x * scale[None, None, :, None]
