"""Row softmax with a row count (50) its pinned block (16) does not divide and a row length of 1000."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[50, 1000])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]))
def softmax_odd_rows(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        out[t, :] = torch.nn.functional.softmax(x[t, :], dim=1)
    return out


def reference(x):
    return torch.softmax(x, dim=1)
