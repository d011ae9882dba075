"""Matmul whose [1, N] bias broadcasts against [tile_m, tile_n] (a size-1 dim indexed by a tile)."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[256, 512], y=bf16[512, 256], bias=bf16[1, 256])
@helion.kernel(static_shapes=True)
def matmul_bias(x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], device=x.device, dtype=torch.promote_types(x.dtype, y.dtype))
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc + bias[tile_m, tile_n]
    return out


def reference(x, y, bias):
    return (x.float() @ y.float() + bias.float()).to(x.dtype)

SMALL = {"x": "bf16[256, 512]", "y": "bf16[512, 256]", "bias": "bf16[1, 256]"}
