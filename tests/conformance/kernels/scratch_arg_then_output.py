"""An argument used as scratch: written, read back in the same tile, and a new output returned."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[128, 128], scratch=f32[128, 128])
@helion.kernel(static_shapes=True)
def scratch_arg_then_output(x: torch.Tensor, scratch: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size()):
        scratch[t] = x[t] + 1.0
        out[t] = scratch[t] * 2.0
    return out


def reference(x, scratch):
    scratch.copy_(x + 1.0)
    return scratch * 2.0
