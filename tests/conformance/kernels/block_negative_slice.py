"""A slice of a loaded block with a negative bound (`[-3:2, :, :]`): refused."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 2, 128], out=f32[1, 2, 128])
@helion.kernel(static_shapes=True)
def block_negative_slice(x: torch.Tensor, out: torch.Tensor) -> None:
    for _ in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(x.size(0), block_size=4):
            acc = acc + x[outer, :, :][-3:2, :, :].float().sum(dim=0)
        out[0, :, :] = acc.to(out.dtype)


REJECT = r"HPL\d\d\d"
