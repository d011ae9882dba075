"""A window of a computed value: `(x + 1)` reshaped to heads, two middle heads picked with
`1 + hl.arange(2)`, reshaped back."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 256])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[64]))
def computed_head_window(x: torch.Tensor) -> torch.Tensor:
    rows = x.size(0)
    out = torch.empty([rows, 128], dtype=x.dtype, device=x.device)
    for tr in hl.tile(rows):
        v = x[tr, :] + 1
        heads = v.reshape(v.size(0), 4, 64)
        middle = heads[:, 1 + hl.arange(2), :]
        out[tr, :] = middle.reshape(v.size(0), 128)
    return out


def reference(x):
    return (x + 1).reshape(64, 4, 64)[:, 1:3, :].reshape(64, 128)
