"""Flash attention on a 4-D tile reshaped to 2-D (`q[tb, th, tm, :].reshape([-1, d])`), carried values
sized by that merged row count, result reshaped back to [1, 1, rows, d]."""
import math

import helion
import helion.language as hl
import torch


# helion: args(q=f32[2, 2, 64, 32], k=f32[2, 2, 64, 32], v=f32[2, 2, 64, 32])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[1, 1, 64, 32]))
def attention_merged_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    b, h, m, n = q.size(0), q.size(1), q.size(2), k.size(2)
    d = hl.specialize(q.size(3))
    out = torch.empty_like(q)
    scale = 1.44269504 / math.sqrt(d)
    for tb, th, tm in hl.tile([b, h, m]):
        rows = q[tb, th, tm, :].reshape([-1, d])
        m_i = hl.full([rows.size(0)], float("-inf"), dtype=torch.float32)
        l_i = hl.full([rows.size(0)], 1.0, dtype=torch.float32)
        acc = hl.zeros([rows.size(0), d], dtype=torch.float32)
        for tn in hl.tile(n):
            keys = k[tb, th, tn, :].reshape([-1, d])
            s = hl.dot(rows * scale, keys.transpose(0, 1), out_dtype=torch.float32)
            m_new = torch.maximum(m_i, torch.amax(s, -1))
            p = torch.exp2(s - m_new[:, None])
            l_i = l_i * torch.exp2(m_i - m_new) + torch.sum(p, -1)
            acc = acc * torch.exp2(m_i - m_new)[:, None]
            acc = torch.addmm(acc, p, v[tb, th, tn, :].reshape([-1, d]))
            m_i = m_new
        out[tb, th, tm, :] = (acc / l_i[:, None]).reshape([1, 1, -1, d])
    return out


def reference(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


TOLERANCE = {"atol": 2e-3, "rtol": 2e-3}
