"""SwiGLU (SiLU of a times b) tiled over every dim; the kernel's name starts with an underscore."""
import helion
import helion.language as hl
import torch


# helion: args(a=f32[64, 256], b=f32[64, 256])
@helion.kernel(static_shapes=True)
def _swiglu_nd(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a, dtype=torch.promote_types(a.dtype, b.dtype))
    for t in hl.tile(a.size()):
        av = a[t].to(torch.float32)
        out[t] = (av * torch.sigmoid(av)).to(b.dtype) * b[t]
    return out


def reference(a, b):
    return torch.nn.functional.silu(a) * b


CONFIGS = [None, {"block_sizes": [16, 128]}, {"block_sizes": [16, 32]}]
