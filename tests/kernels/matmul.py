"""2-D matmul with an f32 accumulator over a K loop (torch.addmm)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[256, 512], y=f32[512, 256])
@helion.kernel(static_shapes=True)
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    k2, n = y.size()
    assert k == k2
    out = torch.empty([m, n], dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], y[tile_k, tile_n])
        out[tile_m, tile_n] = acc
    return out


def reference(x, y):
    return x @ y

SMALL = {"x": "f32[256, 512]", "y": "f32[512, 256]"}
