"""`hl.jagged_tile` whose per-lane ends form a 2-d tensor over two enclosing tiles (batch x head): each
(batch, head) pair sums its own prefix of the last-but-one dim."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(75)
    return [torch.randn(4, 8, 16, 128, generator=g), torch.randint(0, 17, (4, 8), generator=g, dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[2, 8, 8]))
def jagged_tile_two_lane_dims(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    b, h, _, d = x.size()
    out = torch.empty([b, h, d], dtype=x.dtype, device=x.device)
    for tb, th in hl.tile([b, h]):
        ends = lengths[tb, th]
        acc = hl.zeros([tb, th, d], dtype=x.dtype)
        for tk in hl.jagged_tile(ends):
            acc = acc + x[tb, th, tk, :].sum(dim=2)
        out[tb, th, :] = acc
    return out


def reference(x, lengths):
    keep = torch.arange(x.size(2))[None, None, :] < lengths[:, :, None]
    return torch.where(keep[..., None], x, 0.0).sum(2)


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
