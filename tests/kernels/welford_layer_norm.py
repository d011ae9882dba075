"""Layer norm with Welford's running mean and variance over column chunks, then a normalising pass.

Written as upstream Helion's examples are: a bare `@helion.kernel`, the accumulators shaped after a row
slice of `x` with `torch.zeros_like`.
"""
from __future__ import annotations

import helion
import helion.language as hl
import torch


# helion: args(weight=f32[8192], bias=f32[8192], x=f32[2048, 8192], eps=1e-5)
@helion.kernel
def welford_layer_norm(
    weight: torch.Tensor, bias: torch.Tensor, x: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    m, n = x.size()
    y = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        count = torch.zeros_like(x[tile_m, 0], dtype=torch.float32)
        mean = torch.zeros_like(count)
        m2 = torch.zeros_like(count)
        for tile_n in hl.tile(n):
            part = x[tile_m, tile_n].to(torch.float32)
            width = (tile_n.index < n).to(torch.int32).sum()
            part_mean = torch.sum(part, dim=-1) / width
            part_m2 = torch.sum((part - part_mean[:, None]) ** 2, dim=-1)
            total = count + width
            delta = part_mean - mean
            mean = mean + delta * (width / total)
            m2 = m2 + part_m2 + delta * delta * (count * width / total)
            count = total
        rstd = torch.rsqrt(m2 / count + eps)
        for tile_n in hl.tile(n):
            part = x[tile_m, tile_n].to(torch.float32)
            normed = (part - mean[:, None]) * rstd[:, None]
            y[tile_m, tile_n] = (normed * weight[tile_n][None, :] + bias[tile_n][None, :]).to(x.dtype)
    return y


def reference(weight, bias, x, eps=1e-5):
    return torch.nn.functional.layer_norm(x, [x.shape[-1]], weight, bias, eps)


SMALL = {"weight": "f32[512]", "bias": "f32[512]", "x": "f32[64, 512]", "eps": "1e-5"}
