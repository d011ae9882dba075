"""A 1-D tensor read at a grid index and whole (`x[i] + x[:]`): an outer sum, bf16 input."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.arange(32, dtype=torch.bfloat16)]


@helion.kernel(static_shapes=True)
def grid_rank_one_sum(x: torch.Tensor) -> torch.Tensor:
    (n,) = x.shape
    out = torch.empty((n, n), dtype=torch.float32, device=x.device)
    for i in hl.grid(n):
        out[i, :] = x[i].to(torch.float32) + x[:].to(torch.float32)
    return out


def reference(x):
    return x[:, None].float() + x[None, :].float()
