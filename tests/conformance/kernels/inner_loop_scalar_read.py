"""A tensor read in blocks inside an inner loop and also as a single element (`x[0, 0]`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 256], y=f32[32, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 128]))
def inner_loop_scalar_read(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in hl.tile(m):
        for tn in hl.tile(n):
            out[tm, tn] = x[tm, tn] + y[tm, tn] + x[0, 0]
    return out


def reference(x, y):
    return x + y + x[0, 0]
