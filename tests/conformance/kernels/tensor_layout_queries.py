"""Host-side layout queries a kernel asserts or branches on: `x.is_floating_point()`, `x.is_contiguous()` and
`x.stride(d)` (row-major: the kernel reads its arguments contiguous), as upstream's scaled_mm and quant kernels do."""
import helion
import helion.language as hl
import torch


def inputs():
    g = torch.Generator().manual_seed(32)
    return [torch.randn(32, 256, generator=g), torch.randint(-5, 5, (32, 256), generator=g, dtype=torch.int32)]


@helion.kernel(static_shapes=True)
def layout_branches(x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    assert x.is_contiguous()
    acc_dtype = torch.float32 if q.is_floating_point() else torch.int32
    row_stride = x.stride(0)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size()):
        v = q[tile].to(acc_dtype) * 2
        if x.is_floating_point() and row_stride == x.size(1) and x.stride(1) == 1:
            out[tile] = x[tile] + v.to(x.dtype)
        else:
            out[tile] = x[tile]
    return out


def reference(x, q):
    return x + (q * 2).to(x.dtype)
