"""Blocks so large (4096 x 4096 f32, three of them: 192 MiB) that they cannot fit in VMEM: the compiler must say
so instead of producing a kernel that cannot run. (At 2048 x 4096, 96 MiB, libtpu fits it on v5e.)"""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[4096, 4096], y=f32[4096, 4096])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4096, 4096]))
def vmem_overflow(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm, tn in hl.tile(out.size()):
        out[tm, tn] = x[tm, tn] + y[tm, tn]
    return out


def inputs():
    return [torch.zeros(4096, 4096), torch.zeros(4096, 4096)]


REJECT = r"HPL300"
