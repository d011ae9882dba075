"""Integer and float scalar arguments used inside the device loop."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4096], factor=3, offset=0.75)
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[1024]))
def scalar_args(x: torch.Tensor, factor: int, offset: float) -> torch.Tensor:
    y = torch.empty_like(x)
    for t in hl.tile(y.size()):
        y[t] = x[t] * factor + offset
    return y


def reference(x, factor, offset):
    return x * factor + offset
