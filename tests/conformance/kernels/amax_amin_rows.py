"""Row maximum and minimum with `torch.amax` / `torch.amin` along the last dim, two outputs."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 200])
@helion.kernel(static_shapes=True)
def amax_amin_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.size(0)
    hi = torch.empty([n], dtype=x.dtype, device=x.device)
    lo = torch.empty([n], dtype=x.dtype, device=x.device)
    for t in hl.tile(n):
        hi[t] = torch.amax(x[t, :], dim=-1)
        lo[t] = torch.amin(x[t, :], dim=-1)
    return hi, lo


def reference(x):
    return x.amax(-1), x.amin(-1)
