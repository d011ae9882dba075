"""A load followed by `hl.atomic_add` of the loaded value into the same tensor, in an inner loop."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 128]))
def atomic_add_inner_loop(x: torch.Tensor) -> None:
    m, n = x.size()
    for tm in hl.tile(m):
        for tn in hl.tile(n):
            value = x[tm, tn]
            hl.atomic_add(x, [tm, tn], value)


def reference(x):
    x *= 2
