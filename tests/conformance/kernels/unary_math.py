"""Transcendental elementwise ops on positive inputs (exp, log, sqrt, rsqrt, tanh), five outputs."""
import helion
import helion.language as hl
import torch


# helion: args(x=f32[8, 256])
@helion.kernel(static_shapes=True)
def unary_math(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    e = torch.empty_like(x)
    lg = torch.empty_like(x)
    sq = torch.empty_like(x)
    rs = torch.empty_like(x)
    th = torch.empty_like(x)
    for tr, tc in hl.tile(x.size()):
        v = x[tr, tc]
        e[tr, tc] = torch.exp(v)
        lg[tr, tc] = torch.log(v)
        sq[tr, tc] = torch.sqrt(v)
        rs[tr, tc] = torch.rsqrt(v)
        th[tr, tc] = torch.tanh(v)
    return e, lg, sq, rs, th


def reference(x):
    return x.exp(), x.log(), x.sqrt(), x.rsqrt(), x.tanh()


POSITIVE = ("x",)
