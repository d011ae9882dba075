"""Elementwise add of two tensors broadcast against each other in host code, tiled over every dim."""
import helion
import helion.language as hl
import torch


# helion: args(a=f32[512], b=f32[512])
@helion.kernel(static_shapes=True)
def add_broadcast(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = torch.broadcast_tensors(a, b)
    result = torch.empty_like(a)
    for t in hl.tile(result.size()):
        result[t] = a[t] + b[t]
    return result


def reference(a, b):
    return a + b


CONFIGS = [None, {"block_sizes": [128]}]
