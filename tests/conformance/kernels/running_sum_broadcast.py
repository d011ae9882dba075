"""A running row sum carried across K blocks and broadcast into a wider accumulator at every step
(`acc = acc + running[:, :, None]`); the value depends on the K block, which is pinned."""
import helion
import helion.language as hl
import torch


# helion: args(a=f32[2, 64, 384], b=f32[2, 384, 128])
@helion.kernel(static_shapes=True)
def running_sum_broadcast(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    batch, m, k = a.size()
    width = hl.specialize(b.size(-1))
    out = torch.empty([batch, m, width], device=a.device, dtype=a.dtype)
    for tb, tm in hl.tile([batch, m]):
        running = hl.zeros([tb, tm], dtype=torch.float32)
        acc = hl.zeros([tb, tm, width], dtype=torch.float32)
        for tk in hl.tile(k):
            running = running + torch.sum(a[tb, tm, tk], -1)
            acc = acc + running[:, :, None]
        out[tb, tm, :] = acc.to(out.dtype)
    return out


def reference(a, b):
    width = b.size(-1)
    running = torch.zeros(a.shape[:2])
    acc = torch.zeros(*a.shape[:2], width)
    for start in range(0, a.size(-1), 128):
        running = running + a[:, :, start:start + 128].sum(-1)
        acc = acc + running[:, :, None]
    return acc


CONFIGS = [{"block_sizes": [2, 64, 128]}, {"block_sizes": [2, 64, 128], "pallas_pre_broadcast": True}]
TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
