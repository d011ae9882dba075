"""A 1-D bias indexed by the column tile broadcasts over the rows of a 2-D tile."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 384], bias=f32[384])
@helion.kernel(static_shapes=True)
def bias_row_broadcast(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(x.size()):
        out[tm, tn] = x[tm, tn] + bias[tn]
    return out


def reference(x, bias):
    return x + bias


CONFIGS = [None, {"block_sizes": [16, 128]}]
