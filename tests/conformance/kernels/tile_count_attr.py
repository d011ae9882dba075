"""`tile.count` (the number of tiles of a loop) inside a loop with a non-zero begin (`hl.tile(4, 12)`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 128], out=f32[1, 128])
@helion.kernel(static_shapes=True)
def tile_count_attr(x: torch.Tensor, out: torch.Tensor) -> None:
    for _ in hl.grid(1):
        acc = hl.zeros([1, 128], dtype=torch.float32)
        for t in hl.tile(4, 12, block_size=4):
            acc = acc + t.count
        out[0:1, :] = acc


def reference(x, out):
    out.fill_(4.0)
