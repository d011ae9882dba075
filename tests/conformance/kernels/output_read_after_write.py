"""An output written, then read back and rewritten in the same tile."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[2048])
@helion.kernel(static_shapes=True)
def output_read_after_write(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(out.size()):
        out[t] = x[t]
        out[t] = out[t] * 0.5 + 1.0
    return out


def reference(x):
    return x * 0.5 + 1.0


CONFIGS = [None, {"block_sizes": [256]}]
