"""A mean over an `hl.jagged_tile` dim would divide by the block, not each row's length: refused, naming the
construct."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 32, 128], lengths=i32[8])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 32]))
def jagged_tile_mean(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    b, _, d = x.size()
    out = torch.empty([b, d], dtype=x.dtype, device=x.device)
    for tb in hl.tile(b):
        acc = hl.zeros([tb, d], dtype=x.dtype)
        for tk in hl.jagged_tile(lengths[tb]):
            acc = acc + x[tb, tk, :].mean(dim=1)
        out[tb, :] = acc
    return out


REJECT = r"HPL106.*mean over a jagged tile"
