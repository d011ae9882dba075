"""A call that leaves defaulted parameters out (`k(x, y)`): the defaults (a float, a string, an optional tensor
left as None) are bound at compile time and the compiled callable accepts the call as written."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(3)
    return [torch.randn(40, 256, generator=g), torch.randn(40, 256, generator=g)]


@helion.kernel(static_shapes=True)
def scaled_combine(x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor | None = None, scale: float = 0.25,
                   mode: str = "sum") -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        v = x[tile_m, :] * scale + y[tile_m, :]
        if bias is not None:
            v = v + bias[tile_m, :]
        if mode == "sum":
            out[tile_m] = v.sum(-1)
        else:
            out[tile_m] = v.amax(-1)
    return out


def reference(x, y):
    return (x * 0.25 + y).sum(-1)
