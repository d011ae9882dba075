"""`hl.reduce` with combine functions: each row's sum (one tensor), and its argmax as a (value, index) pair with
an unpacked combine function (ties to the first index, as torch)."""
import helion
import helion.language as hl
import torch


def add(a, b):
    return a + b


def larger_first(left_value, left_index, right_value, right_index):
    take = (right_value > left_value) | ((right_value == left_value) & (right_index < left_index))
    return torch.where(take, right_value, left_value), torch.where(take, right_index, left_index)


# helion: args(x=f32[40, 384])
@helion.kernel(static_shapes=True)
def reduce_combine_argmax_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    sums = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    where = torch.empty([x.size(0)], dtype=torch.int32, device=x.device)
    for t in hl.tile(x.size(0)):
        row = x[t, :]
        columns = hl.arange(x.size(1))[None, :].expand_as(row)
        sums[t] = hl.reduce(add, row, dim=1)
        _, at = hl.reduce(larger_first, (row, columns), dim=1, other=(float("-inf"), -1))
        where[t] = at
    return sums, where


def reference(x):
    return x.sum(1), x.argmax(1).to(torch.int32)
