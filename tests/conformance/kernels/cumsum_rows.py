"""`torch.cumsum` along a whole row held in one block (the lane dim), and `cumprod` of a bounded copy."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[16, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def cumsum_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    sums = torch.empty_like(x)
    prods = torch.empty_like(x)
    for tm in hl.tile(x.size(0)):
        row = x[tm, :]
        sums[tm, :] = torch.cumsum(row, dim=1)
        prods[tm, :] = (1.0 + 0.01 * row).cumprod(dim=-1)
    return sums, prods


def reference(x):
    return torch.cumsum(x, 1), (1.0 + 0.01 * x).cumprod(-1)


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
