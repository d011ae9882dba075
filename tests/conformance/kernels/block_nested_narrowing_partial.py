"""Nested narrowing of a loaded 4-D block (`blk[:, 0, :, :][:, 0, :]`) with a block (4) that does not
divide the 6 rows: the padding rows of the last block must not be summed."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[6, 2, 2, 128], out=f32[1, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4]))
def block_nested_narrowing_partial(x: torch.Tensor, out: torch.Tensor) -> None:
    bt = hl.register_block_size(2, x.size(0))
    for _ in hl.grid(1):
        acc = hl.zeros([128], dtype=torch.float32)
        for outer in hl.tile(x.size(0), block_size=bt):
            blk = x[outer, :, :, :]
            head = blk[:, 0, :, :][:, 0, :]
            acc += head.float().sum(dim=0)
        out[0, :] = acc.to(out.dtype)


def reference(x, out):
    out.copy_(x[:, 0, 0].sum(0, keepdim=True))


CONFIGS = [{"block_sizes": [2]}, {"block_sizes": [4]}]
