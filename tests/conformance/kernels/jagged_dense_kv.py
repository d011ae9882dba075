"""Jagged queries against a dense per-sequence K/V (`k[s, :, :, :]` loaded once per program), scores
without softmax."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(63)
    return [torch.randn(40, 2, 128, generator=g) * 0.1, torch.randn(2, 32, 2, 128, generator=g) * 0.1,
            torch.randn(2, 32, 2, 128, generator=g), torch.tensor([0, 13, 40], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]))
def jagged_dense_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(q)
    for s in hl.grid(offsets.size(0) - 1):
        lo = offsets[s]
        hi = offsets[s + 1]
        kb = k[s, :, :, :].transpose(0, 1)
        vb = v[s, :, :, :].transpose(0, 1)
        for tq in hl.tile(lo, hi):
            qb = q[tq, :, :].transpose(0, 1)
            scores = torch.bmm(qb, kb.transpose(-2, -1))
            out[tq, :, :] = torch.bmm(scores, vb).transpose(0, 1).to(out.dtype)
    return out


def reference(q, k, v, offsets):
    out = torch.empty_like(q)
    for s, (a, b) in enumerate(zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)):
        qs, ks, vs = q[a:b].transpose(0, 1), k[s].transpose(0, 1), v[s].transpose(0, 1)
        out[a:b] = ((qs @ ks.transpose(-2, -1)) @ vs).transpose(0, 1)
    return out


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
