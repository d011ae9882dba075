"""Two levels of inner loop: the launch grid tiles M, an inner loop tiles N, and a loop inside that tiles K
(the epilogue structure of squeeze-and-excitation)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 256], w=f32[256, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128, 128]))
def matmul_two_inner_levels(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = w.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm in hl.tile(m):
        for tn in hl.tile(n):
            acc = hl.zeros([tm, tn], dtype=torch.float32)
            for tk in hl.tile(k):
                acc = torch.addmm(acc, x[tm, tk], w[tk, tn])
            out[tm, tn] = acc.to(x.dtype)
    return out


def reference(x, w):
    return x @ w


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
