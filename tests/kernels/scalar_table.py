"""A per-program scalar read from a small table (SMEM) feeding an inner loop; the output is an argument."""
import helion
import helion.language as hl
import torch


# helion: args(biases=f32[4], x=f32[512], out=f32[512])
@helion.kernel(static_shapes=True)
def scalar_lookup(biases: torch.Tensor, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    g_count = biases.size(0)
    m = x.size(0)
    for g in hl.grid(g_count):
        b = biases[g]
        for tile_m in hl.tile(m):
            out[tile_m] = x[tile_m] + b
    return out


def reference(biases, x, out):
    return x + biases[-1]

SMALL = {"biases": "f32[4]", "x": "f32[512]", "out": "f32[512]"}
