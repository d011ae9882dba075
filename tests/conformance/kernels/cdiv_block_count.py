"""`helion.cdiv` in host code sizing a per-block output, with `hl.register_block_size` and `tile.id`."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[48, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]))
def cdiv_block_count(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    rows = hl.register_block_size(m)
    out = torch.empty([helion.cdiv(m, rows), n], dtype=torch.float32, device=x.device)
    for t in hl.tile(m, block_size=rows):
        out[t.id, :] = x[t, :].amax(dim=0)
    return out


def reference(x):
    return x.view(3, 16, 128).amax(1)
