"""A table with a size-1 dim read at the id of a loop whose trip count is read on the device (flex attention's
`kv_indices[b, h, row, blk.id]` under `hl.tile(kv_num_blocks[b, h, row], block_size=1)`, with a block mask made
for one block): every step reads the only element, as torch broadcasts it, never a position past the table."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 128, 128, generator=g)
    counts = torch.tensor([0, 1, 2, 3], dtype=torch.int32)
    starts = torch.tensor([[5], [0], [40], [96]], dtype=torch.int32)
    return [x, counts, starts]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32]))
def size_one_dim_loop_id(x: torch.Tensor, counts: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    G, N, D = x.size()
    out = torch.empty([G, D], dtype=torch.float32, device=x.device)
    for tg, td in hl.tile([G, D], block_size=[1, D]):
        acc = hl.zeros([td], dtype=torch.float32)
        for blk in hl.tile(counts[tg.begin], block_size=1):
            lo = starts[tg.begin, blk.id]
            hi = torch.minimum(lo + 32, lo.new_full([], N))
            for tn in hl.tile(lo, hi):
                acc = acc + x[tg.begin, tn, td].sum(0)
        out[tg.begin, td] = acc
    return out


def reference(x, counts, starts):
    out = torch.zeros(x.size(0), x.size(2))
    for g in range(x.size(0)):
        for s in starts[g].expand(int(counts[g])).tolist():
            out[g] += x[g, s:min(s + 32, x.size(1))].sum(0)
    return out
