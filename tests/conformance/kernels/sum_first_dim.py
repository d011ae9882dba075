"""Sum over the first dim, tiling the columns (`x[:, t].sum(0)`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[48, 256])
@helion.kernel(static_shapes=True)
def sum_first_dim(x: torch.Tensor) -> torch.Tensor:
    _, cols = x.size()
    out = torch.empty([cols], dtype=x.dtype, device=x.device)
    for t in hl.tile(cols):
        out[t] = x[:, t].sum(0)
    return out


def reference(x):
    return x.sum(0)


CONFIGS = [None, {"block_sizes": [128]}]
