"""Attention with K transposed in host code (tile on its last dim), full_like, bmm/baddbmm."""
import math

import helion
import helion.language as hl
import torch


# helion: args(q_in=f32[1, 2, 256, 128], k_in=f32[1, 2, 512, 128], v_in=f32[1, 2, 512, 128])
@helion.kernel(static_shapes=True)
def attn_kt(q_in: torch.Tensor, k_in: torch.Tensor, v_in: torch.Tensor) -> torch.Tensor:
    m_dim = q_in.size(-2)
    n_dim = k_in.size(-2)
    head_dim = hl.specialize(q_in.size(-1))
    q_view = q_in.reshape([-1, m_dim, head_dim])
    k_view = k_in.reshape([-1, n_dim, head_dim]).transpose(1, 2)
    v_view = v_in.reshape([-1, n_dim, head_dim])
    out = torch.empty_like(q_view)
    qk_scale = 1.0 / math.sqrt(head_dim) * 1.44269504
    for tile_b, tile_m in hl.tile([q_view.size(0), m_dim]):
        m_i = hl.full([tile_b, tile_m], float("-inf"), dtype=torch.float32)
        l_i = torch.full_like(m_i, 1.0)
        acc = hl.zeros([tile_b, tile_m, head_dim], dtype=torch.float32)
        q = q_view[tile_b, tile_m, :] * qk_scale
        for tile_n in hl.tile(v_view.size(1)):
            k = k_view[tile_b, :, tile_n]
            qk = torch.bmm(q, k)
            m_ij = torch.maximum(m_i, torch.amax(qk, -1))
            p = torch.exp2(qk - m_ij[:, :, None])
            alpha = torch.exp2(m_i - m_ij)
            l_i = l_i * alpha + torch.sum(p, -1)
            acc = acc * alpha[:, :, None]
            v = v_view[tile_b, tile_n, :]
            acc = torch.baddbmm(acc, p.to(v.dtype), v)
            m_i = m_ij
        out[tile_b, tile_m, :] = (acc / l_i[:, :, None]).to(out.dtype)
    return out.view(q_in.size())


def reference(q_in, k_in, v_in):
    return torch.nn.functional.scaled_dot_product_attention(q_in, k_in, v_in)

SMALL = {"q_in": "f32[1, 2, 256, 128]", "k_in": "f32[1, 2, 512, 128]", "v_in": "f32[1, 2, 512, 128]"}
