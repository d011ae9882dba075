"""A token row of a block reshaped to [2, 2, 2, 128] and narrowed (`[0:1]`) before summing: views composed."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[8, 4, 2, 128], init=bf16[1, 2, 2, 128])
@helion.kernel(static_shapes=True)
def block_row_reshaped_views(x: torch.Tensor, init: torch.Tensor) -> torch.Tensor:
    tokens = x.size(0)
    out = torch.empty_like(init)
    for req in hl.grid(1):
        state = init[req, :, :, :].float()
        for outer in hl.tile(tokens, block_size=4):
            blk = x[outer, :, :, :]
            live = outer.end - outer.begin
            for local in hl.tile(live, block_size=1):
                token = blk[local.begin, :, :, :]
                state += token.reshape(2, 2, 2, 128)[0:1, :, :, :].float().sum(dim=0)
        out[req, :, :, :] = state.to(out.dtype)
    return out


def reference(x, init):
    return (init.float() + x.float().reshape(8, 2, 2, 2, 128)[:, 0].sum(0, keepdim=True)).to(torch.bfloat16)


TOLERANCE = {"atol": 5e-2, "rtol": 2e-2}
