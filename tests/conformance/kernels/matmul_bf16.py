"""bf16 matmul with an f32 accumulator and a bf16 result."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[128, 256], y=bf16[256, 128])
@helion.kernel(static_shapes=True)
def matmul_bf16(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = acc.to(out.dtype)
    return out


def reference(x, y):
    return (x.float() @ y.float()).to(x.dtype)


CONFIGS = [None, {"block_sizes": [128, 128, 128]}]
