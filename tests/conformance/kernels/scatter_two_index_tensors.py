"""Two index tensors in one store with a 2-D value (`out[r[t], c[t]] = values[t, t]`): the value's shape
does not match the indexed positions, so the kernel must be refused."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(21)
    return [torch.randn(16, 16, generator=g), torch.randperm(16, generator=g).to(torch.int32),
            torch.randperm(16, generator=g).to(torch.int32)]


@helion.kernel(static_shapes=True)
def scatter_two_index_tensors(values: torch.Tensor, r: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([values.size(0), values.size(0)], dtype=values.dtype, device=values.device)
    for t in hl.tile(values.size(0)):
        out[r[t], c[t]] = values[t, t]
    return out


REJECT = r"HPL\d\d\d"
