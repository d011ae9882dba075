"""`hl.atomic_add` into an argument with a block (32) larger than its 10 elements."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.full((10,), 2.0), torch.arange(10, dtype=torch.float32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32]))
def atomic_add_partial_block(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    for t in hl.tile(x.size(0)):
        hl.atomic_add(x, [t], y[t])
    return x


def reference(x, y):
    x += y
    return x
