"""A lane window of a loaded block (`loaded[:, 64 + hl.arange(128)]`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[64]))
def loaded_lane_window(x: torch.Tensor) -> torch.Tensor:
    rows = x.size(0)
    out = torch.empty([rows, 128], dtype=x.dtype, device=x.device)
    for tr in hl.tile(rows):
        loaded = x[tr, :]
        out[tr, :] = loaded[:, 64 + hl.arange(128)]
    return out


def reference(x):
    return x[:, 64:192].clone()
