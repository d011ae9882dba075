"""Attention with Q pre-scaled outside the loop, hl.dot(acc=...), .permute/.unsqueeze, block_size=[1, None]."""
import math

import helion
import helion.language as hl
import torch


# helion: args(q=f32[2, 128, 64], k=f32[2, 256, 64], v=f32[2, 256, 64])
@helion.kernel(static_shapes=True)
def attn_prescaled(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    b, m, d = q.shape
    n = k.shape[1]
    d = hl.specialize(d)
    out = torch.empty_like(q, dtype=torch.float32)
    for tb, tm in hl.tile([b, m], block_size=[1, None]):
        qs = q[tb, tm, :] * (1.0 / math.sqrt(d))
        mx = hl.full([tb, tm], float("-inf"), dtype=torch.float32)
        den = hl.zeros([tb, tm], dtype=torch.float32)
        acc = hl.zeros([tb, tm, d], dtype=torch.float32)
        for tn in hl.tile(n):
            s = hl.dot(qs, k[tb, tn, :].permute(0, 2, 1))
            mnew = torch.maximum(mx, s.amax(-1))
            p = torch.exp(s - mnew.unsqueeze(-1))
            corr = torch.exp(mx - mnew)
            den = den * corr + p.sum(-1)
            acc = acc * corr.unsqueeze(-1)
            acc = hl.dot(p, v[tb, tn, :], acc=acc)
            mx = mnew
        out[tb, tm, :] = acc / den.unsqueeze(-1)
    return out


def reference(q, k, v):
    return torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.size(-1)), -1) @ v

SMALL = {"q": "f32[2, 128, 64]", "k": "f32[2, 256, 64]", "v": "f32[2, 256, 64]"}
