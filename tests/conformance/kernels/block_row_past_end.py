"""Row 7 of a 4-row block (`x[outer, :, :][7, :, :]`) is outside the block: the kernel must be refused."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 2, 128], out=f32[1, 2, 128])
@helion.kernel(static_shapes=True)
def block_row_past_end(x: torch.Tensor, out: torch.Tensor) -> None:
    for _ in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(x.size(0), block_size=4):
            acc = acc + x[outer, :, :][7, :, :].float()
        out[0, :, :] = acc.to(out.dtype)


REJECT = r"HPL\d\d\d"
