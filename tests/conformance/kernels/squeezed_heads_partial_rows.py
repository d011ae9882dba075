"""Leading dims indexed by `tile.begin` of block-1 tiles (squeezed), an inner loop from 16 to M (250) in
blocks of 128: the last block is partial; rows below 16 stay zero."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[2, 4, 250, 128])
@helion.kernel(static_shapes=True)
def squeezed_heads_partial_rows(x: torch.Tensor) -> torch.Tensor:
    b, h, m, _ = x.size()
    out = torch.zeros_like(x)
    for tb, th in hl.tile([b, h], block_size=[1, 1]):
        bi = tb.begin
        hi = th.begin
        for tm in hl.tile(16, m, block_size=128):
            out[bi, hi, tm, :] = x[bi, hi, tm, :]
    return out


def reference(x):
    out = torch.zeros_like(x)
    out[:, :, 16:, :] = x[:, :, 16:, :]
    return out
