"""`hl.jagged_tile` with a nonlinear op before the reduction (`exp`), so padding must be masked after the
op, not only at the load."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(4, 16, 128, generator=torch.Generator().manual_seed(54)),
            torch.tensor([3, 0, 16, 7], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[2, 8]))
def jagged_tile_exp_sum(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    b, _, d = x.size()
    out = torch.empty([b, d], dtype=torch.float32, device=x.device)
    for tb in hl.tile(b):
        n = lengths[tb]
        acc = hl.zeros([tb, d], dtype=torch.float32)
        for tk in hl.jagged_tile(n):
            acc += torch.exp(x[tb, tk, :].float()).sum(dim=1)
        out[tb, :] = acc
    return out


def reference(x, lengths):
    return torch.stack([x[r, : int(lengths[r])].exp().sum(0) for r in range(x.size(0))])


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
