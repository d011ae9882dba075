"""A block is loaded, then the same tensor is overwritten through a `view_as` alias, then the loaded block
is read row by row: the rows read are the values loaded before the write."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(51)
    return [torch.randn(8, 2, 128, generator=g), torch.randn(8, 2, 128, generator=g), torch.zeros(1, 2, 128)]


@helion.kernel(static_shapes=True)
def block_read_then_alias_write(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
    tokens = x.size(0)
    alias = x.view_as(x)
    for _ in hl.grid(1):
        acc = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(tokens, block_size=4):
            blk = x[outer, :, :]
            alias[outer, :, :] = y[outer, :, :]
            live = outer.end - outer.begin
            for local in hl.tile(live, block_size=1):
                acc = acc + blk[local.begin, :, :].float()
        out[0, :, :] = acc.to(out.dtype)


def reference(x, y, out):
    out.copy_(x.sum(0, keepdim=True))
    x.copy_(y)
