"""A loaded block used whole (its sum) and row by row in an inner loop."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 2, 128], out=f32[1, 2, 128])
@helion.kernel(static_shapes=True)
def block_whole_and_rows(x: torch.Tensor, out: torch.Tensor) -> None:
    tokens = x.size(0)
    for _ in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(tokens, block_size=4):
            blk = x[outer, :, :]
            acc = acc + blk.float().sum(dim=0)
            live = outer.end - outer.begin
            for local in hl.tile(live, block_size=1):
                acc = acc + blk[local.begin, :, :].float()
        out[0, :, :] = acc.to(out.dtype)


def reference(x, out):
    out.copy_(2 * x.sum(0, keepdim=True))
