"""A 2-D inner loop whose blocks (8, 128) divide neither extent (30, 130): both last blocks are partial."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[2, 30, 130], y=f32[2, 30, 130])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[1, 8, 128]))
def inner_loop_2d_partial(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    b, m, n = x.size()
    out = torch.empty_like(x)
    for tb in hl.tile(b):
        for tm, tn in hl.tile([m, n]):
            out[tb, tm, tn] = x[tb, tm, tn] * y[tb, tm, tn]
    return out


def reference(x, y):
    return x * y


CONFIGS = [{"block_sizes": [1, 8, 128]}, {"block_sizes": [1, 8, 128], "pallas_load_buffer_count": [2, 1]}]
