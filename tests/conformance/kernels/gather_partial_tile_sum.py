"""Rows gathered at positions from a partial tile (10 indices in tiles of 4), then summed over that tile:
the gathered dim inherits the tile's padding, which must be masked out of the sum."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(76)
    return [torch.randn(16, 128, generator=g), torch.randint(0, 16, (10,), generator=g, dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4]))
def gather_partial_tile_sum(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([table.size(1)], dtype=table.dtype, device=table.device)
    for _ in hl.grid(1):
        acc = hl.zeros([table.size(1)], dtype=table.dtype)
        for t in hl.tile(idx.size(0)):
            acc = acc + table[idx[t], :].sum(dim=0)
        out[:] = acc
    return out


def reference(table, idx):
    return table[idx.long()].sum(0)


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
