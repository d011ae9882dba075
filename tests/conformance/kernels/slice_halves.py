"""Static bounded slices on the untiled dim (`dst[t, :16]`, `dst[t, 16:]`), the output an argument."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(64, 32, generator=torch.Generator().manual_seed(28)), torch.zeros(64, 32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]))
def slice_halves(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    for t in hl.tile(src.size(0)):
        dst[t, :16] = src[t, :16]
        dst[t, 16:] = src[t, 16:] * -1.0
    return dst


def reference(src, dst):
    dst[:, :16] = src[:, :16]
    dst[:, 16:] = -src[:, 16:]
    return dst
