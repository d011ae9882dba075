"""A gather along the middle dim of a 3-D table (`table[ta, idx[tb], tc]`)."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(10)
    return [torch.randint(0, 16, (64,), generator=g, dtype=torch.int32), torch.randn(8, 16, 128, generator=g)]


@helion.kernel(static_shapes=True)
def gather_middle_dim(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = torch.empty([table.size(0), idx.size(0), table.size(2)], dtype=table.dtype, device=table.device)
    for ta, tb, tc in hl.tile([table.size(0), idx.size(0), table.size(2)]):
        out[ta, tb, tc] = table[ta, idx[tb], tc]
    return out


def reference(idx, table):
    return table[:, idx.long(), :]
