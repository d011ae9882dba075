"""`name = helion.kernel(other.fn, ...)` at module level (upstream's attention_dynamic): another kernel of the
same function, with its own settings, compiled and called under its own name."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[48, 256], w=f32[256])
@helion.kernel(static_shapes=True)
def scale_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m in hl.tile(x.size(0)):
        out[tile_m, :] = x[tile_m, :] * w[None, :] + 1.0
    return out


scale_rows_dynamic: object = helion.kernel(scale_rows.fn, static_shapes=False)
KERNEL = "scale_rows_dynamic"


def inputs():
    g = torch.Generator().manual_seed(41)
    return [torch.randn(48, 256, generator=g), torch.randn(256, generator=g)]


def reference(x, w):
    return x * w[None, :] + 1.0
