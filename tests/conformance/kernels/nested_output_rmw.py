"""An output row block written in one inner loop and read-modified-written in a loop nested inside it
(`out[tm, tn] = out[tm, tn] + 2`), under a one-program grid."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[128, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[64, 128]))
def nested_output_rmw(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for _ in hl.grid(1):
        for tm in hl.tile(m):
            out[tm, :] = x[tm, :] + 1.0
            for tn in hl.tile(n):
                out[tm, tn] = out[tm, tn] + 2.0
    return out


def reference(x):
    return x + 3.0
