"""A fixed-width inner run (`hl.tile(4, block_size=4)`) over a loaded block of 4 rows."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 2, 128], out=f32[1, 2, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4]))
def block_fixed_run(x: torch.Tensor, out: torch.Tensor) -> None:
    tokens = x.size(0)
    bt = hl.register_block_size(2, tokens)
    for _ in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(tokens, block_size=bt):
            blk = x[outer, :, :]
            for local in hl.tile(4, block_size=4):
                acc = acc + blk[local.index, :, :].float().sum(dim=0)
        out[0, :, :] = acc.to(out.dtype)


def reference(x, out):
    out.copy_(x.sum(0, keepdim=True))
