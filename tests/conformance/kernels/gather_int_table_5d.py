"""A gather from a 5-D int32 table along its first dim."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(13)
    return [torch.randint(0, 8, (8,), generator=g, dtype=torch.int32),
            torch.randint(0, 100, (8, 2, 4, 8, 128), generator=g, dtype=torch.int32)]


@helion.kernel(static_shapes=True)
def gather_int_table_5d(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = torch.empty([idx.size(0), *table.shape[1:]], dtype=table.dtype, device=table.device)
    for tb, ti, tj, tk, tl in hl.tile([idx.size(0), table.size(1), table.size(2), table.size(3), table.size(4)]):
        out[tb, ti, tj, tk, tl] = table[idx[tb], ti, tj, tk, tl]
    return out


def reference(idx, table):
    return table[idx.long()]
