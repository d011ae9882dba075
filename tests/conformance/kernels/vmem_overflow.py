"""Blocks so large (2048 x 4096 f32, three buffers, double-buffered) that they cannot fit in VMEM: the
compiler must say so instead of producing a kernel that cannot run."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[2048, 4096], y=f32[2048, 4096])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[2048, 4096]))
def vmem_overflow(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(out.size()):
        out[tm, tn] = x[tm, tn] + y[tm, tn]
    return out


def inputs():
    return [torch.zeros(2048, 4096), torch.zeros(2048, 4096)]


REJECT = r"HPL300"
