"""One input loaded twice in the same inner-loop statement."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8, 128]))
def inner_loop_same_input_twice(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tm in hl.tile(m):
        for tn in hl.tile(n):
            out[tm, tn] = x[tm, tn] * x[tm, tn] + x[tm, tn]
    return out


def reference(x):
    return x * x + x


CONFIGS = [{"block_sizes": [8, 128]}, {"block_sizes": [8, 128], "pallas_load_buffer_count": [2]}]
