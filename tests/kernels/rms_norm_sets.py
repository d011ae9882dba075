"""RMS normalisation of each row, written as upstream Helion's examples are: bare decorator, two shape sets."""
from __future__ import annotations

import helion
import helion.language as hl
import torch


# helion: args(x=bf16[2048, 4096], weight=bf16[4096], eps=1e-6)
# helion: args(x=bf16[1024, 8192], weight=bf16[8192], eps=1e-6)
@helion.kernel
def rms_norm_rows(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    rows, cols = x.size()
    assert weight.size(0) == cols, "one weight per column"
    y = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        row = x[tile_r, :].to(torch.float32)
        scale = torch.rsqrt(torch.mean(row * row, dim=-1) + eps)
        y[tile_r, :] = (row * scale[:, None] * weight[:].to(torch.float32)).to(y.dtype)
    return y


def reference(x, weight, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


SMALL = {"x": "f32[64, 256]", "weight": "f32[256]", "eps": "1e-6"}
