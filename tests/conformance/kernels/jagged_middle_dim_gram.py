"""A jagged range on the middle dim (`y[:, t, :]`, a sublane dim), moved to the front with `transpose` and
`permute` and multiplied (`bmm`), bf16."""
import helion
import helion.language as hl
import torch


def inputs():
    return [torch.randn(4, 10, 16, generator=torch.Generator().manual_seed(61)).to(torch.bfloat16),
            torch.tensor([0, 10], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[16]))
def jagged_middle_dim_gram(y: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    h = y.size(0)
    out = torch.empty([y.size(1), h, h], dtype=y.dtype, device=y.device)
    for s in hl.grid(offsets.size(0) - 1):
        for t in hl.tile(offsets[s], offsets[s + 1]):
            yb = y[:, t, :]
            out[t, :, :] = torch.bmm(yb.transpose(0, 1), yb.permute(1, 2, 0)).to(out.dtype)
    return out


def reference(y, offsets):
    return torch.bmm(y.float().transpose(0, 1), y.float().permute(1, 2, 0)).to(torch.bfloat16)


TOLERANCE = {"atol": 1e-1, "rtol": 2e-2}
