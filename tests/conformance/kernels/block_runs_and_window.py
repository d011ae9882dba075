"""A masked inner run over a block and a data-dependent window of it (`blk[live - 3:live]`, when at least
three rows are live); 9 rows in blocks of 4."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[9, 2, 128], init=bf16[1, 2, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4]))
def block_runs_and_window(x: torch.Tensor, init: torch.Tensor) -> torch.Tensor:
    tokens = x.size(0)
    bt = hl.register_block_size(4, tokens)
    out = torch.empty_like(init)
    for req in hl.grid(1):
        state = init[req, :, :].to(torch.float32)
        for outer in hl.tile(tokens, block_size=bt):
            blk = x[outer, :, :]
            live = outer.end - outer.begin
            for local in hl.tile(live, block_size=2):
                state = state + blk[local.index, :, :].float().sum(dim=0)
            if live >= 3:
                state = state + blk[live - 3:live, :, :].float().sum(dim=0)
        out[req, :, :] = state.to(out.dtype)
    return out


def reference(x, init):
    xf = x.float()
    total = init.float() + xf.sum(0, keepdim=True) + xf[1:4].sum(0, keepdim=True) + xf[5:8].sum(0, keepdim=True)
    return total.to(torch.bfloat16)


TOLERANCE = {"atol": 1e-1, "rtol": 2e-2}
