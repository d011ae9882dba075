"""One tensor read both as a scalar (`x[b, N - 1]`) and as a block (`x[b, tn]`) in the same tile."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4, 256])
@helion.kernel(static_shapes=True)
def scalar_and_block_same_tensor(x: torch.Tensor) -> torch.Tensor:
    b, n = x.shape
    out = torch.empty_like(x)
    for tb, tn in hl.tile([b, n], block_size=[1, None]):
        last = x[tb.begin, n - 1]
        out[tb.begin, tn] = x[tb.begin, tn] + last
    return out


def reference(x):
    return x + x[:, -1:]


CONFIGS = [None, {"block_sizes": [128]}]
