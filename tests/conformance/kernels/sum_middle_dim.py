"""Sum over the middle dim of a 3-D tensor, tiling the outer two (`x[tb, :, tm].sum(1)`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4, 40, 128])
@helion.kernel(static_shapes=True)
def sum_middle_dim(x: torch.Tensor) -> torch.Tensor:
    b, _, m = x.size()
    out = torch.empty([b, m], dtype=x.dtype, device=x.device)
    for tb, tm in hl.tile([b, m]):
        out[tb, tm] = x[tb, :, tm].sum(1)
    return out


def reference(x):
    return x.sum(1)
