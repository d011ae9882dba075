"""One output written as a block and then at a single point in the same tile (two index patterns)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128]))
def block_and_point_store(x: torch.Tensor) -> torch.Tensor:
    b, n = x.shape
    out = torch.empty_like(x)
    for tb, tn in hl.tile([b, n], block_size=[1, None]):
        out[tb.begin, tn] = x[tb.begin, tn]
        out[tb.begin, n - 1] = x[tb.begin, 0]
    return out


def reference(x):
    out = x.clone()
    out[:, -1] = x[:, 0]
    return out
