"""`hl.jagged_tile(lengths)`: per-row lengths from a tensor bound the inner loop over a dense [B, maxK, D]
backing tensor; zero-length rows give zeros."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(4, 16, 128, generator=torch.Generator().manual_seed(53)),
            torch.tensor([0, 1, 9, 16], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[2, 8]))
def jagged_tile_sum(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    b, _, d = x.size()
    out = torch.empty([b, d], dtype=x.dtype, device=x.device)
    for tb in hl.tile(b):
        n = lengths[tb]
        acc = hl.zeros([tb, d], dtype=x.dtype)
        for tk in hl.jagged_tile(n):
            acc = acc + x[tb, tk, :].sum(dim=1)
        out[tb, :] = acc
    return out


def reference(x, lengths):
    return torch.stack([x[r, : int(lengths[r])].sum(0) for r in range(x.size(0))])


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
