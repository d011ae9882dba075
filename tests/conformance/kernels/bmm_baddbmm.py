"""Batched matmul over a 3-D launch grid with `torch.baddbmm` into an f32 accumulator, bf16, default
config."""
import helion
import helion.language as hl
import torch


# helion: args(a=bf16[4, 128, 256], b=bf16[4, 256, 128])
@helion.kernel(static_shapes=True)
def bmm_baddbmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    nb, m, k = a.size()
    _, _, n = b.size()
    out = torch.empty([nb, m, n], device=a.device, dtype=torch.promote_types(a.dtype, b.dtype))
    for tb, tm, tn in hl.tile([nb, m, n]):
        acc = hl.zeros([tb, tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.baddbmm(acc, a[tb, tm, tk], b[tb, tk, tn])
        out[tb, tm, tn] = acc
    return out


def reference(a, b):
    return torch.bmm(a.float(), b.float()).to(torch.bfloat16)
