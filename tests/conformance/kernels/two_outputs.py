"""Two output-only tensors returned as a tuple."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[1024])
@helion.kernel(static_shapes=True)
def two_outputs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    plus = torch.empty_like(x)
    times = torch.empty_like(x)
    for t in hl.tile(x.size()):
        plus[t] = x[t] + 2.0
        times[t] = x[t] * 3.0
    return plus, times


def reference(x):
    return x + 2.0, x * 3.0
