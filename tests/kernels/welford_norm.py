"""Welford mean/variance over row chunks (three carried values), then a second loop normalises."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 1024], eps=1e-6)
@helion.kernel(static_shapes=True)
def welford_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        count = hl.zeros([tile_m], dtype=torch.float32)
        mean = hl.zeros([tile_m], dtype=torch.float32)
        m2 = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n):
            chunk = x[tile_m, tile_n]
            c = chunk.size(1) * 1.0
            chunk_mean = chunk.mean(dim=1)
            chunk_m2 = ((chunk - chunk_mean[:, None]) ** 2).sum(dim=1)
            new_count = count + c
            delta = chunk_mean - mean
            mean = mean + delta * (c / new_count)
            m2 = m2 + chunk_m2 + delta * delta * (count * c / new_count)
            count = new_count
        rstd = torch.rsqrt(m2 / count + eps)
        for tile_n in hl.tile(n):
            out[tile_m, tile_n] = (x[tile_m, tile_n] - mean[:, None]) * rstd[:, None]
    return out


def reference(x, eps):
    return (x - x.mean(1, keepdim=True)) * torch.rsqrt(x.var(1, unbiased=False, keepdim=True) + eps)

SMALL = {"x": "f32[64, 1024]", "eps": "1e-6"}
