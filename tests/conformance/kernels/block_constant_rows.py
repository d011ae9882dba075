"""Constant rows of a loaded block (`blk[1, :, :]` and `blk[1:3, :, :]`) accumulated over row blocks."""
import helion
import helion.language as hl
import torch


def inputs():
    rows = torch.tensor([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0])
    return [rows[:, None, None].expand(8, 2, 128).contiguous(), torch.zeros(1, 2, 128)]


@helion.kernel(static_shapes=True)
def block_constant_rows(x: torch.Tensor, out: torch.Tensor) -> None:
    for _ in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(x.size(0), block_size=4):
            blk = x[outer, :, :]
            acc = acc + blk[1, :, :].float()
            acc = acc + blk[1:3, :, :].float().sum(dim=0)
        out[0, :, :] = acc.to(out.dtype)


def reference(x, out):
    out.fill_(2 + 2 + 4 + 32 + 32 + 64)
