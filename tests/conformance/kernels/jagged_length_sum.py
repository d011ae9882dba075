"""A loop bound loaded from a tensor (`hl.tile(0, lengths[s])`): per-segment prefix sums of a 1-D tensor."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(256, generator=torch.Generator().manual_seed(39)),
            torch.tensor([128, 256, 64, 200], dtype=torch.int32)]


@helion.kernel(static_shapes=True)
def jagged_length_sum(data: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    b = lengths.size(0)
    out = torch.zeros([b], dtype=data.dtype, device=data.device)
    for s in hl.grid(b):
        n = lengths[s]
        acc = hl.zeros([1], dtype=data.dtype)
        for t in hl.tile(0, n):
            acc = acc + data[t].sum(dim=0).unsqueeze(0)
        out[s] = acc.squeeze(0)
    return out


def reference(data, lengths):
    return torch.stack([data[: int(n)].sum() for n in lengths])


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
