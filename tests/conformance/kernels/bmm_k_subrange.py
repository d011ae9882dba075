"""Batched matmul over a K sub-range `hl.tile(k_lo, k_hi)` given by int arguments, starting at 128 with a
block of 256 (a begin that is not a multiple of the block)."""
import helion
import helion.language as hl
import torch


# helion: args(a=bf16[2, 128, 384], b=bf16[2, 384, 128], k_lo=128, k_hi=384)
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[2, 128, 128, 256]))
def bmm_k_subrange(a: torch.Tensor, b: torch.Tensor, k_lo: int, k_hi: int) -> torch.Tensor:
    nb, m, _ = a.size()
    _, _, n = b.size()
    out = torch.zeros([nb, m, n], device=a.device, dtype=a.dtype)
    for tb, tm, tn in hl.tile([nb, m, n]):
        acc = hl.zeros([tb, tm, tn], dtype=torch.float32)
        for tk in hl.tile(k_lo, k_hi):
            acc = torch.baddbmm(acc, a[tb, tm, tk], b[tb, tk, tn])
        out[tb, tm, tn] = acc.to(out.dtype)
    return out


def reference(a, b, k_lo, k_hi):
    return torch.bmm(a[:, :, k_lo:k_hi].float(), b[:, k_lo:k_hi, :].float()).to(torch.bfloat16)
