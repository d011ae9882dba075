"""Single elements gathered by DMA from a 1-D table (`pallas_indirect_access_mode='dma'`): each copy is the aligned
128-lane chunk holding the element, the element picked from it; a 2-D index tensor."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(23)
    return [torch.randint(0, 1024, (16, 8), generator=g, dtype=torch.int32), torch.randn(1024, generator=g)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8], pallas_indirect_access_mode="dma"))
def dma_gather_1d_table(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    out = torch.empty(idx.shape, dtype=table.dtype, device=table.device)
    for t in hl.tile(idx.size(0)):
        out[t, :] = table[idx[t, :]] + 1.0
    return out


def reference(idx, table):
    return table[idx.long()] + 1.0
