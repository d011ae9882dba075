"""Accumulation across a launch-grid axis: K is tiled on the grid and the output block is read back and
updated at every K step (`out[m, n] = out[m, n] + a[m, k] @ b[k, n]`)."""
import helion
import helion.language as hl
import torch


# helion: args(a=f32[128, 512], b=f32[512, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[64, 128, 128]))
def matmul_k_on_grid(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    _, n = b.size()
    out = torch.zeros([m, n], dtype=torch.float32, device=a.device)
    for tm, tn, tk in hl.tile([m, n, k]):
        out[tm, tn] = out[tm, tn] + a[tm, tk] @ b[tk, tn]
    return out


def reference(a, b):
    return a @ b
