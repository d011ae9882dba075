"""A gather with a 2-D index tile (`table[idx[tb, ts], te]`): output [B, S, E]."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(9)
    return [torch.randint(0, 16, (8, 128), generator=g, dtype=torch.int32), torch.randn(16, 128, generator=g)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 128, 128]))
def gather_2d_index(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = torch.empty([idx.size(0), idx.size(1), table.size(1)], dtype=table.dtype, device=table.device)
    for tb, ts, te in hl.tile([idx.size(0), idx.size(1), table.size(1)]):
        out[tb, ts, te] = table[idx[tb, ts], te]
    return out


def reference(idx, table):
    return table[idx.long()]
