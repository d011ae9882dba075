"""Batched matmul whose K block (256) does not divide K (384): the last K block is partial and must be
masked out of the dot."""
import helion
import helion.language as hl
import torch


# helion: args(a=bf16[2, 128, 384], b=bf16[2, 384, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[2, 128, 128, 256]))
def bmm_partial_k(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    nb, m, k = a.size()
    _, _, n = b.size()
    out = torch.empty([nb, m, n], device=a.device, dtype=a.dtype)
    for tb, tm, tn in hl.tile([nb, m, n]):
        acc = hl.zeros([tb, tm, tn], dtype=torch.float32)
        for tk in hl.tile(k):
            acc = torch.baddbmm(acc, a[tb, tm, tk], b[tb, tk, tn])
        out[tb, tm, tn] = acc.to(out.dtype)
    return out


def reference(a, b):
    return torch.bmm(a.float(), b.float()).to(torch.bfloat16)


CONFIGS = [{"block_sizes": [2, 128, 128, 256]},
           {"block_sizes": [2, 128, 128, 256], "pallas_load_buffer_count": [2, 2]}]
