"""`hl.load` with `extra_mask` reading two tensors through one tile that spans both (a concat)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[32, 20], y=f32[32, 44])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 64]))
def hl_load_masked_concat(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), x.size(1) + y.size(1)], dtype=x.dtype, device=x.device)
    for t0, t1 in hl.tile(out.size()):
        left = hl.load(x, [t0, t1], extra_mask=(t1.index < x.size(1))[None, :])
        right = hl.load(y, [t0, t1.index - x.size(1)], extra_mask=(t1.index >= x.size(1))[None, :])
        out[t0, t1] = torch.where((t1.index < x.size(1))[None, :], left, right)
    return out


def reference(x, y):
    return torch.cat([x, y], dim=1)
