"""A 3-D block permuted (`.permute(2, 0, 1)`) and stored at permuted tiles."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 16, 128])
@helion.kernel(static_shapes=True)
def permute_blocks(x: torch.Tensor) -> torch.Tensor:
    a, b, c = x.size()
    out = torch.empty([c, a, b], dtype=x.dtype, device=x.device)
    for ta, tb, tc in hl.tile([a, b, c]):
        out[tc, ta, tb] = x[ta, tb, tc].permute(2, 0, 1)
    return out


def reference(x):
    return x.permute(2, 0, 1).contiguous()
