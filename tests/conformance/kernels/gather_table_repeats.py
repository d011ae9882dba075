"""An embedding-style gather: 256 indices with repeats into a 16-row table, bf16."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(8)
    return [torch.randint(0, 16, (256,), generator=g, dtype=torch.int32),
            torch.randn(16, 128, generator=g).to(torch.bfloat16)]


@helion.kernel(static_shapes=True)
def gather_table_repeats(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = torch.empty([idx.size(0), table.size(1)], dtype=table.dtype, device=table.device)
    for tb, te in hl.tile([idx.size(0), table.size(1)]):
        out[tb, te] = table[idx[tb], te]
    return out


def reference(idx, table):
    return table[idx.long()]


CONFIGS = [None, {"block_sizes": [128, 128]}]
