"""A loaded block permuted (`permute(1, 0, 2)`), then one of its (now second-dim) rows taken per inner
step."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 2, 128], out=f32[1, 2, 128])
@helion.kernel(static_shapes=True)
def block_permute_then_row(x: torch.Tensor, out: torch.Tensor) -> None:
    for _ in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(x.size(0), block_size=4):
            blk = x[outer, :, :].permute(1, 0, 2)
            live = outer.end - outer.begin
            for local in hl.tile(live, block_size=1):
                acc += blk[:, local.begin, :].float()
        out[0, :, :] = acc.to(out.dtype)


def reference(x, out):
    out.copy_(x.sum(0, keepdim=True))
