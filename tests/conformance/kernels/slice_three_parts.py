"""Three static slices with both bounds (`:8`, `8:16`, `16:`) on the untiled dim."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(64, 32, generator=torch.Generator().manual_seed(29)), torch.zeros(64, 32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]))
def slice_three_parts(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    for t in hl.tile(src.size(0)):
        dst[t, :8] = src[t, :8]
        dst[t, 8:16] = src[t, 8:16] * 2.0
        dst[t, 16:] = src[t, 16:]
    return dst


def reference(src, dst):
    dst.copy_(src)
    dst[:, 8:16] *= 2.0
    return dst
