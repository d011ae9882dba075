"""A jagged projection plus a skip connection: the loaded block is used transposed (into a bmm) and as is
(added), bf16; one segment of 50 rows in blocks of 32."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(59)
    return [torch.randn(50, 4, 16, generator=g).to(torch.bfloat16), torch.randn(4, 16, 16, generator=g).to(torch.bfloat16),
            torch.tensor([0, 50], dtype=torch.int32)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[32]))
def jagged_projection_skip(y: torch.Tensor, w: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(y)
    for s in hl.grid(offsets.size(0) - 1):
        wb = w[:, :, :]
        for t in hl.tile(offsets[s], offsets[s + 1]):
            yb = y[t, :, :]
            proj = torch.bmm(yb.transpose(0, 1), wb).transpose(0, 1)
            out[t, :, :] = (proj + yb).to(out.dtype)
    return out


def reference(y, w, offsets):
    proj = torch.bmm(y.float().transpose(0, 1), w.float()).transpose(0, 1)
    return (proj + y.float()).to(torch.bfloat16)


TOLERANCE = {"atol": 6e-2, "rtol": 2e-2}
