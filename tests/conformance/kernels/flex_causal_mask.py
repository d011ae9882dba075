"""Flex-attention-style kernel with a same-file `def` mask_mod comparing the index vectors (`q_idx >= kv_idx`:
causal) and a `def` score_mod adding a relative-position bias; both compiled in, kv tiles above the diagonal fully
masked (128-row blocks over 256 positions)."""
import math

import helion
import helion.language as hl
import torch
from torch.nn.attention.flex_attention import _create_empty_block_mask


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def relative_bias(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx).to(torch.float32) * 0.01


def inputs():
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 256, 64, generator=g) for _ in range(3))
    bm = _create_empty_block_mask(q, k)
    return [q, k, v, relative_bias, bm.kv_num_blocks, bm.kv_indices, causal, bm.BLOCK_SIZE[0],
            bm.BLOCK_SIZE[1], 1 / math.sqrt(64)]


@helion.kernel(static_shapes=True)
def flex_causal_mask(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, score_mod, kv_num_blocks: torch.Tensor,
                       kv_indices: torch.Tensor, mask_mod, sparse_m: int, sparse_n: int,
                       scale: float) -> torch.Tensor:
    B, H, M, D = q.size()
    N = k.size(2)
    out = torch.empty_like(q)
    block_m = hl.register_block_size(min(128, sparse_m))
    block_n = hl.register_block_size(min(128, sparse_n))
    for tb, th, tm in hl.tile([B, H, M], block_size=[1, 1, block_m]):
        row_max = hl.full([tm], float("-inf"), dtype=torch.float32)
        denom = hl.zeros([tm], dtype=torch.float32)
        acc = hl.zeros([tm, D], dtype=torch.float32)
        qb = q[tb.begin, th.begin, tm, :]
        b_ix = (tb.begin + hl.arange(tb.block_size))[:, None]
        h_ix = (th.begin + hl.arange(th.block_size))[:, None]
        m_ix = (tm.begin + hl.arange(tm.block_size))[:, None]
        row = tm.begin // sparse_m
        for blk in hl.tile(kv_num_blocks[tb.begin, th.begin, row], block_size=1):
            lo = kv_indices[tb.begin, th.begin, row, blk.id]
            hi = torch.minimum(lo + sparse_n, lo.new_full([], N))
            for tn in hl.tile(lo, hi, block_size=block_n):
                n_ix = (tn.begin + hl.arange(tn.block_size))[None, :]
                s = hl.dot(qb, k[tb.begin, th.begin, tn, :].T) * scale
                s = score_mod(s, b_ix, h_ix, m_ix, n_ix)
                s = torch.where(mask_mod(b_ix, h_ix, m_ix, n_ix), s, float("-inf"))
                new_max = torch.maximum(row_max, torch.amax(s, -1))
                p = torch.exp(s - new_max[:, None])
                corr = torch.exp(row_max - new_max)
                denom = denom * corr + p.sum(-1)
                acc = acc * corr[:, None] + hl.dot(p, v[tb.begin, th.begin, tn, :])
                row_max = new_max
        out[tb, th, tm, :] = (acc / denom[:, None])[None, None, :, :].to(out.dtype)
    return out


def reference(q, k, v, *_):
    n = q.size(2)
    pos = torch.arange(n)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1)) + (pos[:, None] - pos[None, :]).float() * 0.01
    s = s.masked_fill(pos[:, None] < pos[None, :], float("-inf"))
    return torch.softmax(s, -1) @ v


TOLERANCE = {"atol": 2e-3, "rtol": 2e-3}
