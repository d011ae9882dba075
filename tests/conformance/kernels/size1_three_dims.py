"""A [1, N, 1] input plus an int32 bias unsqueezed twice, into a 3-D output; two size-1 dims broadcast."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(3)
    return [torch.randn(1, 12, 1, generator=g), torch.arange(12, dtype=torch.int32), torch.zeros(1, 12, 12)]


@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[1, 16, 16]))
def size1_three_dims(x: torch.Tensor, bias: torch.Tensor, out: torch.Tensor) -> None:
    for t0, t1, t2 in hl.tile(out.size()):
        b = bias[t2].unsqueeze(0).unsqueeze(0)
        out[t0, t1, t2] = x[t0, t1, t2] + b.to(torch.float32)


def reference(x, bias, out):
    out.copy_(x + bias.float())
