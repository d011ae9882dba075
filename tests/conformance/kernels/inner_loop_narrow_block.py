"""An inner loop whose column block (64) is narrower than a lane tile, on 64-wide rows."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 64], y=f32[32, 64])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 64]))
def inner_loop_narrow_block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in hl.tile(m):
        for tn in hl.tile(n):
            out[tm, tn] = x[tm, tn] - y[tm, tn]
    return out


def reference(x, y):
    return x - y
