"""Target-aware causal jagged HSTU attention, forward (as upstream Helion's TPU production kernel documents it):
packed [tokens, heads, dim] q/k/v split into sequences by `offsets`; within a sequence of length n whose last
`targets[b]` tokens are targets, query i sees key j when j <= i and j is a history token, or when j == i; the
output is silu(q k^T) v over the keys it sees, with no other scale. Pinned config and shape: upstream's
(512x512 blocks, emit_pipeline asked for, worklist grouping 2; the s4096_b65 case: 65 sequences, 245760 tokens,
4 heads of 128, bf16): each of q, k, v and the output is 240 MiB.
"""
import helion
import helion.language as hl
import torch

HSTU_CONFIG = helion.Config(block_sizes=[512, 512], pallas_loop_type="emit_pipeline", pallas_worklist_grouping=2)


# helion: args(q=bf16[245760, 4, 128], k=bf16[245760, 4, 128], v=bf16[245760, 4, 128], offsets=i32[66], targets=i32[65])
# helion: args(q=bf16[32768, 4, 128], k=bf16[32768, 4, 128], v=bf16[32768, 4, 128], offsets=i32[4], targets=i32[3])
@helion.kernel(static_shapes=True, config=HSTU_CONFIG)
def jagged_hstu_attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offsets: torch.Tensor,
                              targets: torch.Tensor) -> torch.Tensor:
    heads = hl.specialize(q.size(1))
    dim = hl.specialize(q.size(2))
    out = torch.empty_like(v)
    for b in hl.grid(offsets.size(0) - 1):
        lo = offsets[b]
        hi = offsets[b + 1]
        history = hi - targets[b]
        for tq in hl.tile(lo, hi):
            qb = q[tq, :, :].transpose(0, 1)
            acc = hl.zeros([heads, tq, dim], dtype=torch.float32)
            for tk in hl.tile(lo, min(hi, tq.end)):
                kb = k[tk, :, :].transpose(0, 1)
                vb = v[tk, :, :].transpose(0, 1)
                s = torch.nn.functional.silu(torch.bmm(qb, kb.transpose(1, 2)).float())
                row = tq.index[:, None]
                col = tk.index[None, :]
                seen = ((row >= col) & (col < history)) | (row == col)
                p = torch.where(seen[None, :, :], s, 0.0)
                acc = hl.dot(p.to(v.dtype), vb, acc=acc)
            out[tq, :, :] = acc.transpose(0, 1).to(out.dtype)
    return out


def reference(q, k, v, offsets, targets):
    out = torch.zeros_like(v)
    for b in range(offsets.numel() - 1):
        lo, hi = int(offsets[b]), int(offsets[b + 1])
        n = hi - lo
        qs, ks, vs = (t[lo:hi].transpose(0, 1) for t in (q, k, v))
        s = torch.nn.functional.silu((qs @ ks.transpose(1, 2)).float())  # scores rounded like the kernel's bmm
        pos = torch.arange(n)
        row, col = pos[:, None], pos[None, :]
        seen = ((row >= col) & (col < n - int(targets[b]))) | (row == col)
        p = torch.where(seen, s, 0.0).to(v.dtype).float()
        out[lo:hi] = (p @ vs.float()).transpose(0, 1).to(v.dtype)
    return out


def inputs():
    """Five sequences (one empty, one shorter than a block, one spanning three) over 95 tokens, 2 heads."""
    g = torch.Generator().manual_seed(7)
    lengths = torch.tensor([5, 40, 0, 17, 33])
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)]).to(torch.int32)
    total = int(offsets[-1])
    q, k, v = (torch.randn(total, 2, 128, generator=g).bfloat16() * scale for scale in (0.25, 0.25, 1.0))
    targets = torch.tensor([1, 3, 0, 2, 5], dtype=torch.int32)
    return [q, k, v, offsets, targets]
