"""A block-1 tile's `begin` as a scalar index drops that dim, so `.T` transposes the remaining 2-D block."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4, 64, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[64, 128, 1]))
def begin_index_transpose(x: torch.Tensor) -> torch.Tensor:
    b, m, n = x.shape
    out = torch.empty([b, n, m], dtype=x.dtype, device=x.device)
    for tm, tn, tb in hl.tile([m, n, b]):
        out[tb.begin, tn, tm] = x[tb.begin, tm, tn].T
    return out


def reference(x):
    return x.permute(0, 2, 1).contiguous()
