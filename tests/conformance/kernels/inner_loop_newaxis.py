"""An inner-loop load with a leading `None` (`x[None, tm, tn]`), squeezed back before use."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 128]))
def inner_loop_newaxis(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in hl.tile(m):
        for tn in hl.tile(n):
            out[tm, tn] = x[None, tm, tn].squeeze(0) + 1
    return out


def reference(x):
    return x + 1
