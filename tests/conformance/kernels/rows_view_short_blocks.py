"""Row sums scaled per row with 8-row blocks: the 1-D input and output, tiled by blocks too short for a rank-1
TPU block, are read and written as rows of their [n / 8, 8] views beside the 2-D tensor's row blocks."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 512], w=f32[64])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def rows_view_short_blocks(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for t in hl.tile(x.size(0)):
        out[t] = torch.sum(x[t, :], dim=-1) * w[t]
    return out


def reference(x, w):
    return x.sum(-1) * w


TOLERANCE = {"atol": 1e-3, "rtol": 1e-4}
