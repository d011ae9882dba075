"""An argument updated in place and then read back in the same tile to produce a second, new output."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[2048])
@helion.kernel(static_shapes=True)
def inplace_then_output(x: torch.Tensor) -> torch.Tensor:
    doubled = torch.empty_like(x)
    for t in hl.tile(x.size()):
        x[t] = x[t] - 1.0
        doubled[t] = x[t] * 2.0
    return doubled


def reference(x):
    x -= 1.0
    return x * 2.0


CONFIGS = [None, {"block_sizes": [512]}]
