"""Outer product from two 1-D tiles with `[:, None]` and `[None, :]` broadcasting."""
import helion
import helion.language as hl
import torch


# helion: args(a=f32[64], b=f32[256])
@helion.kernel(static_shapes=True)
def outer_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    (m,) = a.size()
    (n,) = b.size()
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for ti, tj in hl.tile([m, n]):
        out[ti, tj] = a[ti][:, None] * b[tj][None, :]
    return out


def reference(a, b):
    return a[:, None] * b[None, :]


CONFIGS = [None, {"block_sizes": [64, 128]}]
