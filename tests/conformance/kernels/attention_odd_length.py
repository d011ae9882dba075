"""Flash attention with a key length (200) that its block (128) does not divide: the padded keys of the
last block must not take part in the max or the sum."""
import math

import helion
import helion.language as hl
import torch


# helion: args(q=f32[2, 64, 128], k=f32[2, 200, 128], v=f32[2, 200, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[1, 64, 128]))
def attention_odd_length(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    bh, sq, d = q.size()
    d = hl.specialize(d)
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(d)
    for tb, tm in hl.tile([bh, sq]):
        m_i = hl.full([tb, tm], float("-inf"), dtype=torch.float32)
        l_i = hl.zeros([tb, tm], dtype=torch.float32)
        acc = hl.zeros([tb, tm, d], dtype=torch.float32)
        for tn in hl.tile(k.size(1)):
            scores = torch.bmm(q[tb, tm, :], k[tb, tn, :].transpose(1, 2)) * scale
            m_new = torch.maximum(m_i, torch.amax(scores, -1))
            p = torch.exp(scores - m_new[:, :, None])
            alpha = torch.exp(m_i - m_new)
            l_i = l_i * alpha + torch.sum(p, -1)
            acc = torch.baddbmm(acc * alpha[:, :, None], p, v[tb, tn, :])
            m_i = m_new
        out[tb, tm, :] = acc / l_i[:, :, None]
    return out


def reference(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


TOLERANCE = {"atol": 2e-3, "rtol": 2e-3}
