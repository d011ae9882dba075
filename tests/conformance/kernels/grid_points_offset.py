"""`hl.grid` reading at a shifted index (`x[i + n // 2]`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[256])
@helion.kernel(static_shapes=True)
def grid_points_offset(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.size()
    out = torch.empty(n // 2, dtype=torch.float32, device=x.device)
    for i in hl.grid(n // 2):
        out[i] = x[i + n // 2] - 0.5
    return out


def reference(x):
    return x[x.numel() // 2:] - 0.5
