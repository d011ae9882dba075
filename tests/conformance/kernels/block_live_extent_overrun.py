"""An inner loop over `live + 4` rows of a block that holds only `live`: reads past the block, refused."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 2, 128], out=f32[1, 2, 128])
@helion.kernel(static_shapes=True)
def block_live_extent_overrun(x: torch.Tensor, out: torch.Tensor) -> None:
    for _ in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(x.size(0), block_size=4):
            blk = x[outer, :, :]
            live = outer.end - outer.begin
            for local in hl.tile(live + 4, block_size=1):
                acc = acc + blk[local.begin, :, :].float()
        out[0, :, :] = acc.to(out.dtype)


REJECT = r"HPL\d\d\d"
