"""Rows of a table gathered by DMA inside an inner loop (`pallas_indirect_access_mode='dma'`): per-row copies
double-buffered across the loop's steps, indices from an index tensor plus an offset, repeated and negative
positions (torch wraps them), a partial last block."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(21)
    idx = torch.randint(-40, 40, (2, 44), generator=g, dtype=torch.int32)
    idx[0, 5] = idx[0, 9]  # a row gathered twice
    return [idx, torch.randn(40, 3, 8, 128, generator=g)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8], pallas_indirect_access_mode="dma"))
def dma_gather_rows_inner(idx: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    batch, n = idx.size()
    out = torch.empty([batch, n, table.size(2), table.size(3)], dtype=table.dtype, device=table.device)
    for b in hl.grid(batch):
        for t in hl.tile(n):
            rows = table[idx[b, t], 1, :, :]
            out[b, t, :, :] = rows * 2.0
    return out


def reference(idx, table):
    return table[idx.long(), 1] * 2.0
