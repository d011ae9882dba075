"""A loaded 4-D block narrowed on an untiled dim (`blk[:, 0, :, :]`) and summed over row blocks."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[8, 2, 2, 128])
@helion.kernel(static_shapes=True)
def block_select_untiled_dim(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([1, 2, 128], device=x.device, dtype=x.dtype)
    for _ in hl.grid(1):
        state = hl.zeros([2, 128], dtype=torch.float32)
        for outer in hl.tile(x.size(0), block_size=4):
            blk = x[outer, :, :, :]
            state += blk[:, 0, :, :].float().sum(dim=0)
        out[0, :, :] = state.to(out.dtype)
    return out


def reference(x):
    return x[:, 0].float().sum(0, keepdim=True).to(torch.bfloat16)


TOLERANCE = {"atol": 5e-2, "rtol": 2e-2}
