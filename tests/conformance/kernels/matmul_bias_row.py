"""Matmul plus a [1, N] bias row indexed by the output tiles (the size-1 dim must not follow the M axis),
bf16."""
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[128, 256], y=bf16[256, 256], bias=bf16[1, 256])
@helion.kernel(static_shapes=True)
def matmul_bias_row(x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], device=x.device, dtype=torch.promote_types(x.dtype, y.dtype))
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = acc + bias[tm, tn]
    return out


def reference(x, y, bias):
    return (x.float() @ y.float() + bias.float()).to(torch.bfloat16)


CONFIGS = [None, {"block_sizes": [64, 128, 128]}]
TOLERANCE = {"atol": 5e-2, "rtol": 2e-2}
