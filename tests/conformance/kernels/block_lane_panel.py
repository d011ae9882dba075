"""An aligned static lane slice of a loaded block (`blk[:, :, 128:256]`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[8, 4, 256])
@helion.kernel(static_shapes=True)
def block_lane_panel(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty([1, 4, 128], device=x.device, dtype=x.dtype)
    for _ in hl.grid(1):
        state = hl.zeros([4, 128], dtype=torch.float32)
        for outer in hl.tile(x.size(0), block_size=4):
            blk = x[outer, :, :]
            state += blk[:, :, 128:256].float().sum(dim=0)
        out[0, :, :] = state.to(out.dtype)
    return out


def reference(x):
    return x[:, :, 128:256].float().sum(0, keepdim=True).to(torch.bfloat16)


TOLERANCE = {"atol": 5e-2, "rtol": 2e-2}
