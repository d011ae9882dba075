"""A loaded block reshaped so the lane layout changes (`reshape(-1, 4, 64)`), then a row per inner step."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 2, 128], out=f32[1, 4, 64])
@helion.kernel(static_shapes=True)
def block_reshape_then_row(x: torch.Tensor, out: torch.Tensor) -> None:
    for _ in hl.grid(1):
        acc = hl.zeros([4, 64], dtype=torch.float32)
        for outer in hl.tile(x.size(0), block_size=4):
            blk = x[outer, :, :].reshape(-1, 4, 64)
            live = outer.end - outer.begin
            for local in hl.tile(live, block_size=1):
                acc += blk[local.begin, :, :].float()
        out[0, :, :] = acc.to(out.dtype)


def reference(x, out):
    out.copy_(x.reshape(8, 4, 64).sum(0, keepdim=True))
