"""`hl.atomic_add` through an index tensor: duplicates accumulate (upstream's Pallas backend refuses it)."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(22)
    return [torch.randn(256, generator=g), torch.randint(0, 64, (256,), generator=g, dtype=torch.int32)]


@helion.kernel(static_shapes=True)
def atomic_add_indexed(values: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([64], dtype=values.dtype, device=values.device)
    for t in hl.tile(values.size(0)):
        hl.atomic_add(out, [idx[t]], values[t])
    return out


def reference(values, idx):
    return torch.zeros(64).index_add_(0, idx.long(), values)


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
