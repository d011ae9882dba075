"""`cumsum` down the rows (the sublane dim) of tiles that do not divide the column (20 rows in tiles of 8),
carried across tiles; and a running count of positive entries (`cumsum` of a bool)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[20, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def cumsum_partial_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty_like(x)
    count = torch.empty([x.size(0), x.size(1)], dtype=torch.int32, device=x.device)
    for _ in hl.grid(1):
        above = hl.zeros([x.size(1)], dtype=torch.float32)
        seen = hl.zeros([x.size(1)], dtype=torch.int32)
        for tr in hl.tile(x.size(0)):
            block = x[tr, :]
            out[tr, :] = block.cumsum(0) + above[None, :]
            positive = (block > 0).cumsum(0, dtype=torch.int32)
            count[tr, :] = positive + seen[None, :]
            above = above + block.sum(0)
            seen = seen + (block > 0).sum(0).to(torch.int32)
    return out, count


def reference(x):
    return x.cumsum(0), (x > 0).cumsum(0).to(torch.int32)


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
