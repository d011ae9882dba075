"""Flash attention with a 256-wide head (wider than a lane tile), bf16 inputs, `hl.dot` with an f32 result."""
import math

import helion
import helion.language as hl
import torch


# helion: args(q=bf16[2, 128, 256], k=bf16[2, 128, 256], v=bf16[2, 128, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[1, 64, 64]))
def attention_wide_head(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    bh, s, d = q.size()
    d = hl.specialize(d)
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(d)
    for tb, tm in hl.tile([bh, s]):
        m_i = hl.full([tb, tm], float("-inf"), dtype=torch.float32)
        l_i = hl.zeros([tb, tm], dtype=torch.float32)
        acc = hl.zeros([tb, tm, d], dtype=torch.float32)
        for tn in hl.tile(k.size(1)):
            scores = hl.dot(q[tb, tm, :], k[tb, tn, :].transpose(1, 2), out_dtype=torch.float32) * scale
            m_new = torch.maximum(m_i, torch.amax(scores, -1))
            p = torch.exp(scores - m_new[:, :, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, -1)
            acc = acc * alpha[:, :, None] + hl.dot(p.to(v.dtype), v[tb, tn, :], out_dtype=torch.float32)
            m_i = m_new
        out[tb, tm, :] = (acc / l_i[:, :, None]).to(out.dtype)
    return out


def reference(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float()).to(q.dtype)
