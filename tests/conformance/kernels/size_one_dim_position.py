"""A position in a dim of size 1 reads its only element, whatever the position (Helion drops a size-1 dim's
offset; flex attention reads a block mask built for one batch and head at every batch and head): a row block
of `bias` [1, N] and a scalar of `scale` [1, 1] at the batch tile's first position, for every batch."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4, 256], bias=f32[1, 256], scale=f32[1, 1])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[1, 128]))
def size_one_dim_position(x: torch.Tensor, bias: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    B, N = x.size()
    out = torch.empty_like(x)
    for tb, tn in hl.tile([B, N]):
        out[tb.begin, tn] = (x[tb.begin, tn] + bias[tb.begin, tn]) * scale[tb.begin, 0]
    return out


def reference(x, bias, scale):
    return (x + bias) * scale
