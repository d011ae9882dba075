"""A comparison of a column of values with a whole row (`x[t][:, None] < y[None, :]`) cast to float; the tile
block size is fixed in the loop (`block_size=[...]`)."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[512], y=f32[128])
@helion.kernel(static_shapes=True)
def compare_to_float(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    (m,) = y.shape
    out = torch.empty((n, m), dtype=torch.float32)
    for t in hl.tile([n], block_size=[m]):
        out[t, :] = (x[t][:, None] < y[None, :]).to(torch.float32)
    return out


def reference(x, y):
    return (x[:, None] < y[None, :]).to(torch.float32)
