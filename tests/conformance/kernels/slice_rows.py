"""Static slices on the sublane dim (`dst[:32, t]`, `dst[32:, t]`) while tiling the lanes."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(64, 256, generator=torch.Generator().manual_seed(30)), torch.zeros(64, 256)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128]))
def slice_rows(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    for t in hl.tile(src.size(1)):
        dst[:32, t] = src[:32, t] + 1.0
        dst[32:, t] = src[32:, t]
    return dst


def reference(src, dst):
    dst.copy_(src)
    dst[:32] += 1.0
    return dst
