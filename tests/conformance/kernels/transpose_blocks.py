"""A 2-D block transposed in the kernel (`x[tm, tn].T`) and stored at swapped tiles."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[128, 256])
@helion.kernel(static_shapes=True)
def transpose_blocks(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([n, m], dtype=x.dtype, device=x.device)
    for tm, tn in hl.tile([m, n]):
        out[tn, tm] = x[tm, tn].T
    return out


def reference(x):
    return x.T.contiguous()


CONFIGS = [None, {"block_sizes": [128, 128]}]
