"""torch.broadcast_tensors in host code before an elementwise grid."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 256], y=f32[1, 256])
@helion.kernel(static_shapes=True)
def bcast_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x, y = torch.broadcast_tensors(x, y)
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out


def reference(x, y):
    return x + y

SMALL = {"x": "f32[64, 256]", "y": "f32[1, 256]"}
