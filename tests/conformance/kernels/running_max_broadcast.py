"""A running maximum of block row-maxima (`torch.maximum(scale, amax(chunk, -1))`) broadcast into an
accumulator each K step; narrow 64-wide accumulator; K block pinned."""
import helion
import helion.language as hl
import torch


# helion: args(a=f32[2, 64, 256], b=f32[2, 256, 64])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[2, 64, 128]))
def running_max_broadcast(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    batch, m, k = a.size()
    width = hl.specialize(b.size(-1))
    out = torch.empty([batch, m, width], device=a.device, dtype=a.dtype)
    for tb, tm in hl.tile([batch, m]):
        scale = hl.zeros([tb, tm], dtype=torch.float32)
        acc = hl.zeros([tb, tm, width], dtype=torch.float32)
        for tk in hl.tile(k):
            scale = torch.maximum(scale, torch.amax(a[tb, tm, tk], -1))
            acc = acc + scale[:, :, None]
        out[tb, tm, :] = acc.to(out.dtype)
    return out


def reference(a, b):
    scale = torch.zeros(a.shape[:2])
    acc = torch.zeros(*a.shape[:2], b.size(-1))
    for start in range(0, a.size(-1), 128):
        scale = torch.maximum(scale, a[:, :, start:start + 128].amax(-1))
        acc = acc + scale[:, :, None]
    return acc
