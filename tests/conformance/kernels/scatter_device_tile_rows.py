"""A store whose rows are a device-bounded tile's positions shifted by a group start (grouped GEMM over jagged
groups): `out[start + tile_m.index, tile_n] = acc`. The partial last block's padded rows point into the next
group; they are masked out of the scatter, so only the group's own rows are written."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(11)
    return [torch.randn(83, 64, generator=g), torch.randn(64, 128, generator=g),
            torch.tensor([0, 21, 21, 60, 83], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16, 128, 64]))
def grouped_rows(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    total, k = a.shape
    _, n = b.shape
    out = torch.zeros([total, n], dtype=torch.float32, device=a.device)
    for g in hl.grid(offsets.size(0) - 1):
        start = offsets[g]
        rows = offsets[g + 1] - start
        for tile_m, tile_n in hl.tile([rows, n]):
            acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
            for tile_k in hl.tile(k):
                acc = torch.addmm(acc, a[start + tile_m.index, tile_k], b[tile_k, tile_n])
            out[start + tile_m.index, tile_n] = acc * (g + 1)
    return out


def reference(a, b, offsets):
    out = torch.zeros(a.shape[0], b.shape[1])
    for g in range(offsets.numel() - 1):
        s, e = int(offsets[g]), int(offsets[g + 1])
        out[s:e] = (a[s:e] @ b) * (g + 1)
    return out


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}
