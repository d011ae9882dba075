"""A negative row of a loaded block (`x[outer, :, :][-1, :, :]`) where the last block is partial (6 rows in
blocks of 4): torch reads the last live row of each block; reading a padding row would be wrong."""
import helion
import helion.language as hl
import torch


def inputs():
    rows = torch.arange(1.0, 7.0)
    return [rows[:, None, None].expand(6, 2, 128).contiguous(), torch.zeros(1, 2, 128)]


@helion.kernel(static_shapes=True)
def block_negative_row(x: torch.Tensor, out: torch.Tensor) -> None:
    for _ in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(x.size(0), block_size=4):
            acc = acc + x[outer, :, :][-1, :, :].float()
        out[0, :, :] = acc.to(out.dtype)


def reference(x, out):
    out.fill_(4.0 + 6.0)
