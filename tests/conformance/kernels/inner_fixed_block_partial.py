"""An inner loop whose block size is fixed in the code (`block_size=4`) and does not divide the extent
(6 rows): the last block is partial and must be masked (or the kernel refused)."""
import helion
import helion.language as hl
import torch


def inputs():
    rows = torch.arange(1.0, 7.0)
    return [rows[:, None, None].expand(6, 2, 128).contiguous(), torch.zeros(1, 2, 128)]


@helion.kernel(static_shapes=True)
def inner_fixed_block_partial(x: torch.Tensor, out: torch.Tensor) -> None:
    for _ in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(x.size(0), block_size=4):
            acc = acc + x[outer, :, :].float().sum(dim=0)
        out[0, :, :] = acc.to(out.dtype)


def reference(x, out):
    out.fill_(21.0)
