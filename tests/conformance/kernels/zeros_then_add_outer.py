"""Arithmetic on an `hl.zeros` accumulator outside the inner loop (`acc += 1.0`), then `+=` of a keepdim
row sum inside it."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32, 128]))
def zeros_then_add_outer(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tm in hl.tile(m):
        acc = hl.zeros([tm, n], dtype=torch.float32)
        acc += 1.0
        for tk in hl.tile(n):
            acc += x[tm, tk].to(torch.float32).sum(dim=-1, keepdim=True)
        out[tm, :] = acc.to(x.dtype)
    return out


def reference(x):
    return (1.0 + x.sum(-1, keepdim=True)).expand_as(x).clone()
