"""A value read along an `hl.jagged_tile` without the tile of rows whose lengths bound it (`x[k, :]`): which
of its positions are valid differs per row, so the reduction cannot be masked and must be refused."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 128], lengths=i32[8])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 8]))
def jagged_tile_without_lanes(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    b = lengths.size(0)
    out = torch.empty([b, x.size(1)], dtype=x.dtype, device=x.device)
    for tb in hl.tile(b):
        acc = hl.zeros([tb, x.size(1)], dtype=x.dtype)
        for tk in hl.jagged_tile(lengths[tb]):
            acc = acc + x[tk, :].sum(dim=0)[None, :]
        out[tb, :] = acc
    return out


REJECT = r"HPL106.*jagged tile `tk` but not along `tb`"
