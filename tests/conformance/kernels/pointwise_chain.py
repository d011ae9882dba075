"""A chain of elementwise ops (multiply, relu, sin, sigmoid) in one tile."""
import helion
import helion.language as hl
import torch


# helion: args(u=f32[2048], v=f32[2048])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[512]))
def pointwise_chain(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    res = torch.empty_like(u)
    for blk in hl.tile(res.size()):
        res[blk] = torch.sigmoid(torch.sin(torch.relu(u[blk] * v[blk])))
    return res


def reference(u, v):
    return torch.sigmoid(torch.sin(torch.relu(u * v)))
