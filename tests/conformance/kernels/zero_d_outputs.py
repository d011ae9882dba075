"""Writes to 0-d tensors: an `hl.atomic_add` total into a 0-d allocation and into a 0-d argument, and a store
`out[()] = ...` from a one-step grid; each is the [1] view of the 0-d tensor, written as a whole block."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[64, 128], acc=f32[], s=f32[])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]))
def zero_d_outputs(x: torch.Tensor, acc: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    total = torch.zeros([], dtype=torch.float32, device=x.device)
    for t in hl.tile(x.size(0)):
        part = x[t, :].sum()
        hl.atomic_add(total, [], part)
        hl.atomic_add(acc, [], part * s[()])
    corner = torch.empty([], dtype=torch.float32, device=x.device)
    for g in hl.grid(1):
        corner[()] = x[g, 0] + s[()]
    return total, corner


def inputs():
    return torch.randn(64, 128), torch.tensor(3.0), torch.tensor(0.25)


def reference(x, acc, s):
    acc += x.sum() * s
    return x.sum(), x[0, 0] + s


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
