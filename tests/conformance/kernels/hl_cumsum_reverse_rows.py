"""Suffix sums of each row (`hl.cumsum(..., reverse=True)`), and running sums of int32 counts, which `hl.cumsum`
keeps in int32 (`torch.cumsum` would give int64)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[24, 320], n=i32[24, 320])
@helion.kernel(static_shapes=True)
def hl_cumsum_reverse_rows(x: torch.Tensor, n: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    suffix = torch.empty_like(x)
    running = torch.empty_like(n)
    for t in hl.tile(x.size(0)):
        suffix[t, :] = hl.cumsum(x[t, :], dim=1, reverse=True)
        running[t, :] = hl.cumsum(n[t, :] % 7, 1)
    return suffix, running


def reference(x, n):
    return x.flip(1).cumsum(1).flip(1), torch.cumsum(n % 7, 1).to(torch.int32)
