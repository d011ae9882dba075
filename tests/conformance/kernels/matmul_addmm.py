"""Matmul with an f32 accumulator over an inner K loop (`torch.addmm`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[128, 256], y=f32[256, 256])
@helion.kernel(static_shapes=True)
def matmul_addmm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=torch.promote_types(x.dtype, y.dtype), device=x.device)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = acc
    return out


def reference(x, y):
    return x @ y


CONFIGS = [None, {"block_sizes": [64, 128, 128]}]
TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
