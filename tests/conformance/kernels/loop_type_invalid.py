"""A config naming a loop strategy that does not exist must be refused, never silently replaced."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 256], y=f32[32, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 128], pallas_loop_type="pipelined"))
def loop_type_invalid(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for rows in hl.tile(m):
        for cols in hl.tile(n):
            out[rows, cols] = x[rows, cols] * y[rows, cols]
    return out


REJECT = r"HPL109 .*pallas_loop_type"
