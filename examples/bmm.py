"""Batched matrix multiply: the grid covers (batch, M, N) and an inner loop walks K into an f32 accumulator."""

import helion
import helion.language as hl
import torch


# helion: args(a=bf16[64, 2048, 2048], b=bf16[64, 2048, 2048])
@helion.kernel(static_shapes=True)
def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    batch, m, k = a.size()
    _, _, n = b.size()
    c = torch.empty([batch, m, n], dtype=torch.promote_types(a.dtype, b.dtype), device=a.device)
    for tile_b, tile_m, tile_n in hl.tile([batch, m, n]):
        partial = hl.zeros([tile_b, tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            partial = torch.baddbmm(partial, a[tile_b, tile_m, tile_k], b[tile_b, tile_k, tile_n])
        c[tile_b, tile_m, tile_n] = partial.to(c.dtype)
    return c


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a.float(), b.float()).to(a.dtype)


SMALL = {"a": "f32[2, 256, 512]", "b": "f32[2, 512, 256]"}
