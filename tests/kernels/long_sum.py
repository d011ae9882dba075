"""Row sum over a long row: a fixed block_size inner loop with an in-place accumulator."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 2048])
@helion.kernel()
def long_sum(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, 512], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=512):
            acc += x[tile_m, tile_n]
        out[tile_m] = acc.sum(-1)
    return out


def reference(x):
    return x.sum(-1)

SMALL = {"x": "f32[64, 2048]"}
