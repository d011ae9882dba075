"""Elementwise sum of two same-shaped tensors, tiled over both dimensions.

The smallest useful kernel: one load per input, one store, no inner loop.
"""

import helion
import helion.language as hl
import torch


# helion: args(x=bf16[1024, 1024], y=bf16[1024, 1024])
# helion: args(x=bf16[16384, 16384], y=bf16[16384, 16384])
@helion.kernel(static_shapes=True)
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    result = torch.empty_like(x)
    for block in hl.tile(result.size()):
        result[block] = x[block] + y[block]
    return result


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


SMALL = {"x": "f32[256, 512]", "y": "f32[256, 512]"}
