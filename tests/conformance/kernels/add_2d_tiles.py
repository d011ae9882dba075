"""Elementwise add over a 2-D launch grid with two tile variables."""
import helion
import helion.language as hl
import torch


# helion: args(lhs=f32[32, 512], rhs=f32[32, 512])
@helion.kernel(static_shapes=True)
def add_2d_tiles(lhs: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    total = torch.empty_like(lhs)
    for rows, cols in hl.tile(total.size()):
        total[rows, cols] = lhs[rows, cols] + rhs[rows, cols]
    return total


def reference(lhs, rhs):
    return lhs + rhs


CONFIGS = [None, {"block_sizes": [8, 512]}, {"block_sizes": [16, 128]}]
