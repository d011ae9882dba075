"""Jagged causal attention without softmax: per sequence, query tiles against key tiles up to the query
tile's end (`hl.tile(k_lo, min(k_hi, tq.end))`), a causal mask from `tile.index`, heads moved to the front
with `transpose(0, 1)`."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(55)
    offsets = torch.tensor([0, 16, 48], dtype=torch.int32)
    return [torch.randn(48, 2, 128, generator=g) * 0.1, torch.randn(48, 2, 128, generator=g) * 0.1,
            torch.randn(48, 2, 128, generator=g), offsets]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 16]))
def jagged_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    h = hl.specialize(q.size(1))
    d = hl.specialize(q.size(2))
    out = torch.empty_like(q)
    for s in hl.grid(offsets.size(0) - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        for tq in hl.tile(lo, hi):
            qb = q[tq, :, :].transpose(0, 1)
            acc = hl.zeros([h, tq, d], dtype=torch.float32)
            for tk in hl.tile(lo, min(hi, tq.end)):
                kb = k[tk, :, :].transpose(0, 1)
                vb = v[tk, :, :].transpose(0, 1)
                scores = torch.bmm(qb, kb.transpose(-2, -1))
                causal = tk.index[None, None, :] <= tq.index[None, :, None]
                scores = torch.where(causal, scores, 0.0)
                acc = torch.baddbmm(acc, scores, vb)
            out[tq, :, :] = acc.transpose(0, 1).to(out.dtype)
    return out


def reference(q, k, v, offsets):
    out = torch.empty_like(q)
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        qs, ks, vs = (t[a:b].transpose(0, 1) for t in (q, k, v))
        scores = torch.tril(qs @ ks.transpose(-2, -1))
        out[a:b] = (scores @ vs).transpose(0, 1)
    return out


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
