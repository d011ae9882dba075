"""An in-place update of an argument inside an inner loop (`x[tm, tn] = x[tm, tn] + y[tm, tn]`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 256], y=f32[32, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 128]))
def inner_loop_inplace(x: torch.Tensor, y: torch.Tensor) -> None:
    m, n = x.size()
    for tm in hl.tile(m):
        for tn in hl.tile(n):
            x[tm, tn] = x[tm, tn] + y[tm, tn]


def reference(x, y):
    x += y
