"""A single-program grid (`hl.grid(1)`) whose inner loop sums a 3-D tensor over its leading dim into a
specialized [H, D] accumulator."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 4, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]))
def grid_one_leading_sum(x: torch.Tensor) -> torch.Tensor:
    h = hl.specialize(x.size(1))
    d = hl.specialize(x.size(2))
    out = torch.empty([1, h, d], dtype=torch.float32, device=x.device)
    for owner in hl.grid(1):
        acc = hl.zeros([h, d], dtype=torch.float32)
        for t in hl.tile(x.size(0)):
            acc = acc + x[t, :, :].to(torch.float32).sum(dim=0)
        out[owner, :, :] = acc
    return out


def reference(x):
    return x.sum(0, keepdim=True)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
