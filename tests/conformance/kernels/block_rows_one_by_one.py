"""Rows of a loaded block taken one at a time by an inner block-1 loop (`blk[local.begin, :, :]`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[8, 2, 128], init=bf16[1, 2, 128])
@helion.kernel(static_shapes=True)
def block_rows_one_by_one(x: torch.Tensor, init: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(init)
    for _ in hl.grid(1):
        state = init[0, :, :].float()
        for outer in hl.tile(x.size(0), block_size=4):
            blk = x[outer, :, :]
            for local in hl.tile(4, block_size=1):
                state += blk[local.begin, :, :].float()
        out[0, :, :] = state.to(out.dtype)
    return out


def reference(x, init):
    return (init.float() + x.float().sum(0, keepdim=True)).to(torch.bfloat16)


TOLERANCE = {"atol": 5e-2, "rtol": 2e-2}
