"""`hl.jagged_tile` under a tile of rows that does not divide the batch (6 rows in tiles of 4): the padded
rows' lengths are garbage and must not stretch the loop or leak into stored rows; row maxima with -inf
for an empty row."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(6, 24, 128, generator=torch.Generator().manual_seed(71)),
            torch.tensor([5, 0, 24, 1, 17, 8], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[4, 8]))
def jagged_tile_partial_rows(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    rows, _, cols = x.size()
    out = torch.empty([rows, cols], dtype=x.dtype, device=x.device)
    for rows_t in hl.tile(rows):
        ends = lengths[rows_t]
        best = hl.full([rows_t, cols], float("-inf"), dtype=x.dtype)
        for k in hl.jagged_tile(ends):
            best = torch.maximum(best, x[rows_t, k, :].amax(dim=1))
        out[rows_t, :] = best
    return out


def reference(x, lengths):
    return torch.stack([x[r, : int(n)].amax(0) if int(n) else torch.full((x.size(2),), float("-inf"))
                        for r, n in enumerate(lengths)])
