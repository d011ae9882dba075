"""Every other row of a loaded block (`blk[hl.arange(0, 4, 2), :, :]`)."""
import helion
import helion.language as hl
import torch


def inputs():
    rows = torch.arange(1.0, 9.0)
    return [rows[:, None, None].expand(8, 2, 128).contiguous(), torch.zeros(1, 2, 128)]


@helion.kernel(static_shapes=True)
def block_strided_rows(x: torch.Tensor, out: torch.Tensor) -> None:
    for _ in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(x.size(0), block_size=4):
            blk = x[outer, :, :]
            acc = acc + blk[hl.arange(0, 4, 2), :, :].float().sum(dim=0)
        out[0, :, :] = acc.to(out.dtype)


def reference(x, out):
    out.fill_(1 + 3 + 5 + 7)
