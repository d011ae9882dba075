"""A gather of 256 rows from a table too large for VMEM (65537 x 64 f32, 16 MiB): per-row DMA territory."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(16)
    return [torch.randint(0, 65537, (256,), generator=g, dtype=torch.int32), torch.randn(65537, 64, generator=g)]


@helion.kernel(static_shapes=True)
def gather_large_table(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = torch.empty([idx.size(0), table.size(1)], dtype=table.dtype, device=table.device)
    for tb, te in hl.tile([idx.size(0), table.size(1)]):
        out[tb, te] = table[idx[tb], te]
    return out


def reference(idx, table):
    return table[idx.long()]
