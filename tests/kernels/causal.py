"""Causal flash attention: masks from tile.index of the outer and inner tiles (inner position needed in every strategy)."""
import math

import helion
import helion.language as hl
import torch


# helion: args(q=f32[2, 256, 128], k=f32[2, 256, 128], v=f32[2, 256, 128])
@helion.kernel(static_shapes=True)
def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    b, m, d = q.size()
    n = k.size(1)
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(d)
    for tile_b, tile_m in hl.tile([b, m]):
        m_i = hl.full([tile_b, tile_m], float("-inf"), dtype=torch.float32)
        l_i = hl.zeros([tile_b, tile_m], dtype=torch.float32)
        acc = hl.zeros([tile_b, tile_m, d], dtype=torch.float32)
        qb = q[tile_b, tile_m, :]
        for tile_n in hl.tile(n):
            kb = k[tile_b, tile_n, :]
            s = torch.bmm(qb, kb.transpose(1, 2)) * scale
            mask = tile_m.index[:, None] >= tile_n.index[None, :]
            s = torch.where(mask[None, :, :], s, float("-inf"))
            m_new = torch.maximum(m_i, torch.amax(s, -1))
            p = torch.exp(s - m_new[:, :, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + p.sum(-1)
            acc = acc * alpha[:, :, None] + torch.bmm(p, v[tile_b, tile_n, :])
            m_i = m_new
        out[tile_b, tile_m, :] = acc / l_i[:, :, None]
    return out


def reference(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

SMALL = {"q": "f32[2, 256, 128]", "k": "f32[2, 256, 128]", "v": "f32[2, 256, 128]"}
