"""A 0-d tensor argument read with `hl.load(s, [])` between two tiled inputs."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(25)
    return [torch.randn(256, 256, generator=g), torch.tensor(2.5), torch.randn(256, 256, generator=g)]


@helion.kernel(static_shapes=True)
def hl_load_0d(x: torch.Tensor, s: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for ta, tb in hl.tile([x.size(0), x.size(1)], block_size=[128, 128]):
        out[ta, tb] = x[ta, tb] * hl.load(s, []) + y[ta, tb]
    return out


def reference(x, s, y):
    return x * s + y
