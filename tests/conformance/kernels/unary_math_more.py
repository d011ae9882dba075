"""More elementwise ops: exp2, log2, abs, cos, negation, maximum/minimum against a constant, written as
separately allocated outputs."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 256])
@helion.kernel(static_shapes=True)
def unary_math_more(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    two = torch.empty_like(x)
    trig = torch.empty_like(x)
    clipped = torch.empty_like(x)
    neg = torch.empty_like(x)
    for tr, tc in hl.tile(x.size()):
        v = x[tr, tc]
        two[tr, tc] = torch.exp2(v) + torch.log2(torch.abs(v) + 1.0)
        trig[tr, tc] = torch.cos(v)
        clipped[tr, tc] = torch.minimum(torch.maximum(v, torch.full_like(v, -0.5)), torch.full_like(v, 0.5))
        neg[tr, tc] = -v
    return two, trig, clipped, neg


def reference(x):
    return torch.exp2(x) + torch.log2(x.abs() + 1.0), x.cos(), x.clamp(-0.5, 0.5), -x
