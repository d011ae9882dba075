"""A lane block (128) wider than the row (100): the load is padded, the store must write only 100 lanes."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 100])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128]))
def lane_block_over_extent(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t0, t1 in hl.tile(x.size()):
        out[t0, t1] = x[t0, t1] * 2.0
    return out


def reference(x):
    return x * 2.0
