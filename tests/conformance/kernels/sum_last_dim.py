"""Sum over the last dim of each row tile (`x[t, :].sum(-1)`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 96])
@helion.kernel(static_shapes=True)
def sum_last_dim(x: torch.Tensor) -> torch.Tensor:
    rows, _ = x.size()
    out = torch.empty([rows], dtype=x.dtype, device=x.device)
    for t in hl.tile(rows):
        out[t] = x[t, :].sum(-1)
    return out


def reference(x):
    return x.sum(-1)
