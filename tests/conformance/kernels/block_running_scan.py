"""A running sum over tokens: each row of a block, taken one at a time within the live part of the block
(`hl.tile(outer.end - outer.begin, block_size=1)`), updates a state written out after every token; 9
tokens in blocks of 4 leave a partial last block."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[9, 2, 128], init=bf16[1, 2, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4]))
def block_running_scan(x: torch.Tensor, init: torch.Tensor) -> torch.Tensor:
    tokens, _, _ = x.size()
    bt = hl.register_block_size(2, tokens)
    out = torch.empty_like(x)
    for req in hl.grid(1):
        state = init[req, :, :].to(torch.float32)
        for outer in hl.tile(tokens, block_size=bt):
            blk = x[outer, :, :]
            live = outer.end - outer.begin
            for local in hl.tile(live, block_size=1):
                state = state + blk[local.begin, :, :].to(torch.float32)
                out[outer.begin + local.begin, :, :] = state.to(out.dtype)
    return out


def reference(x, init):
    return (init.float() + x.float().cumsum(0)).to(torch.bfloat16)


TOLERANCE = {"atol": 5e-2, "rtol": 2e-2}
