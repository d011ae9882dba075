"""A column per grid program (`x[:, c]`, a runtime lane index) written as an output row: a transpose."""
import helion
import helion.language as hl
import torch


def inputs():
    return [(torch.arange(17 * 20) % 53).reshape(17, 20).to(torch.float32)]


@helion.kernel(static_shapes=True)
def grid_column_gather(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty((cols, rows), dtype=torch.float32, device=x.device)
    for c in hl.grid(cols):
        out[c, :] = x[:, c].to(torch.float32)
    return out


def reference(x):
    return x.T.contiguous()
