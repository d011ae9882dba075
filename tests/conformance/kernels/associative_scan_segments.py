"""Running sums that restart at every change of id along each row (`hl.associative_scan` of a (value, id) pair
with an unpacked combine function), and each row's running maximum from its end (`reverse=True`)."""
import helion
import helion.language as hl
import torch


def segment_sum(left_values, left_ids, right_values, right_ids):
    return torch.where(left_ids == right_ids, left_values + right_values, right_values), right_ids


def larger(a, b):
    return torch.maximum(a, b)


# helion: args(x=f32[24, 320], ids=i32[24, 320])
@helion.kernel(static_shapes=True)
def associative_scan_segments(x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    sums = torch.empty_like(x)
    peaks = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        row = x[t, :]
        values, _ = hl.associative_scan(segment_sum, (row, ids[t, :]), dim=1)
        sums[t, :] = values
        peaks[t, :] = hl.associative_scan(larger, row, dim=1, reverse=True)
    return sums, peaks


def inputs():
    x = torch.randn(24, 320)
    ids = (torch.rand(24, 320) < 0.1).to(torch.int32).cumsum(1).to(torch.int32)  # runs of ~10 equal ids
    return x, ids


def reference(x, ids):
    sums = x.clone()
    for j in range(1, x.size(1)):
        same = ids[:, j] == ids[:, j - 1]
        sums[:, j] = torch.where(same, sums[:, j - 1] + x[:, j], x[:, j])
    return sums, x.flip(1).cummax(1).values.flip(1)
