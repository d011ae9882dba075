"""Jagged sliding-window attention without softmax: the key loop's begin depends on the query tile
(`max(k_lo, tq.begin - 16)`) and its end too (`min(k_hi, tq.end)`), with a window mask."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(62)
    return [torch.randn(64, 2, 128, generator=g) * 0.1, torch.randn(64, 2, 128, generator=g) * 0.1,
            torch.randn(64, 2, 128, generator=g), torch.tensor([0, 24, 64], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 16]))
def jagged_sliding_window(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    h = hl.specialize(q.size(1))
    d = hl.specialize(q.size(2))
    out = torch.empty_like(q)
    for s in hl.grid(offsets.size(0) - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        for tq in hl.tile(lo, hi):
            qb = q[tq, :, :].transpose(0, 1)
            acc = hl.zeros([h, tq, d], dtype=torch.float32)
            for tk in hl.tile(max(lo, tq.begin - 16), min(hi, tq.end)):
                kb = k[tk, :, :].transpose(0, 1)
                vb = v[tk, :, :].transpose(0, 1)
                scores = torch.bmm(qb, kb.transpose(-2, -1))
                gap = tq.index[None, :, None] - tk.index[None, None, :]
                scores = torch.where((gap >= 0) & (gap <= 16), scores, 0.0)
                acc = torch.baddbmm(acc, scores, vb)
            out[tq, :, :] = acc.transpose(0, 1).to(out.dtype)
    return out


def reference(q, k, v, offsets):
    out = torch.empty_like(q)
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        qs, ks, vs = (t[a:b].transpose(0, 1) for t in (q, k, v))
        pos = torch.arange(b - a)
        gap = pos[:, None] - pos[None, :]
        scores = torch.where((gap >= 0) & (gap <= 16), qs @ ks.transpose(-2, -1), 0.0)
        out[a:b] = (scores @ vs).transpose(0, 1)
    return out


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
