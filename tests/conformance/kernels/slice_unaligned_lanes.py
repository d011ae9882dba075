"""Static lane slices at 200, not a multiple of 128 (`:200`, `200:`)."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(32, 512, generator=torch.Generator().manual_seed(31)), torch.zeros(32, 512)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]))
def slice_unaligned_lanes(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    for t in hl.tile(src.size(0)):
        dst[t, :200] = src[t, :200]
        dst[t, 200:] = src[t, 200:] * 0.5
    return dst


def reference(src, dst):
    dst.copy_(src)
    dst[:, 200:] *= 0.5
    return dst
