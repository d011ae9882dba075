"""A scatter whose masked-off rows point at a valid row and rewrite its old value (MoE token routing:
`C[idx, t] = where(valid, acc, C[idx, t])` with invalid rows' idx clamped to the first token): duplicate
positions are written by the row that changes them, so the masked-off rows cannot undo the valid write."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(13)
    perm = torch.randperm(24, generator=g).to(torch.int32)
    return [torch.randn(24, 128, generator=g), perm, torch.tensor([0, 7, 7, 24], dtype=torch.int32), 17]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32, 128]))
def routed_rows(x: torch.Tensor, order: torch.Tensor, offsets: torch.Tensor, max_rows: int) -> torch.Tensor:
    n, d = x.shape
    out = torch.zeros([n, d], dtype=x.dtype, device=x.device)
    for e in hl.grid(offsets.size(0) - 1):
        start = offsets[e]
        count = offsets[e + 1] - start
        for tile_t, tile_d in hl.tile([max_rows, d]):
            valid = tile_t.index < count
            rows = order[start + torch.where(valid, tile_t.index, 0)]
            old = out[rows, tile_d]
            out[rows, tile_d] = torch.where(valid[:, None], x[rows, tile_d] * (e + 1), old)
    return out


def reference(x, order, offsets, max_rows):
    out = torch.zeros_like(x)
    for e in range(offsets.numel() - 1):
        rows = order[int(offsets[e]):int(offsets[e + 1])].long()
        out[rows] = x[rows] * (e + 1)
    return out
