"""A row-sum accumulator carried across an inner loop (`acc = acc + sum(x[tm, tk], -1)`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 512])
@helion.kernel(static_shapes=True)
def inner_loop_rowsum(x: torch.Tensor) -> torch.Tensor:
    n, m = x.size()
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tn in hl.tile(n):
        acc = hl.zeros([tn], dtype=torch.float32)
        for tk in hl.tile(m):
            acc = acc + torch.sum(x[tn, tk], -1)
        out[tn] = acc.to(out.dtype)
    return out


def reference(x):
    return x.sum(-1)


CONFIGS = [None, {"block_sizes": [64, 128]}, {"block_sizes": [64, 128], "pallas_pre_broadcast": True}]
