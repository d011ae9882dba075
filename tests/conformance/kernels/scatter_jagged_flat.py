"""`hl.store` into a flattened output at positions built from a jagged tile (`starts[:, None] + t.index`),
as jagged_dense_bmm does: positions past each lane's length are masked out of the scatter."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(12)
    offsets = torch.tensor([0, 5, 5, 17, 20], dtype=torch.int32)
    return [offsets, torch.randn(20, 32, generator=g)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4, 8, 32]))
def jagged_scale_rows(offsets: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    rows, d = x.shape
    out = torch.zeros([rows * d], dtype=x.dtype, device=x.device)
    x_flat = x.view(-1)
    for tile_b in hl.tile(offsets.size(0) - 1):
        starts = offsets[tile_b]
        lengths = offsets[tile_b.index + 1] - starts
        for tile_r in hl.jagged_tile(lengths):
            pos = starts[:, None] + tile_r.index[None, :]
            for tile_d in hl.tile(d):
                flat = pos[:, :, None] * d + tile_d.index[None, None, :]
                v = hl.load(x_flat, [flat])
                hl.store(out, [flat], v * 2.0 + 1.0)
    return out.view(rows, d)


def reference(offsets, x):
    return x * 2.0 + 1.0
