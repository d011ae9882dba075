"""Kernels made the other ways vLLM's files make them (written for helion-ls' tests): a second kernel of the same
body with other settings, `helion.kernel(...)(other.fn)`, and kernels defined only under a module-level `if`."""

import os

import helion
import helion.language as hl
import torch

_FAST_PATH = os.environ.get("NO_FAST_PATH") is None


# helion: args(x=f32[64, 256])
@helion.kernel()
def negate(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.shape):
        out[tile] = -x[tile]
    return out


negate_static = helion.kernel(static_shapes=True)(negate.fn)

if _FAST_PATH:

    # helion: args(x=f32[32, 128])
    @helion.kernel()
    def square(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.shape):
            out[tile] = x[tile] * x[tile]
        return out

else:

    def square(x: torch.Tensor) -> torch.Tensor:
        return x * x
