"""Host-code `.view(-1)` of inputs and outputs, a 1-D tile over `numel()`, two outputs (a GEGLU backward)."""
import helion
import helion.language as hl
import torch


# helion: args(g=f32[32, 256], a=f32[32, 256], b=f32[32, 256])
@helion.kernel(static_shapes=True)
def host_flatten_two_outputs(g: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    ga = torch.empty_like(a)
    gb = torch.empty_like(b)
    g1, a1, b1, ga1, gb1 = g.view(-1), a.view(-1), b.view(-1), ga.view(-1), gb.view(-1)
    for t in hl.tile(a.numel()):
        av = a1[t]
        th = torch.tanh(0.7978845608028654 * (av + 0.044715 * av * av * av))
        gelu = 0.5 * av * (1.0 + th)
        gb1[t] = g1[t] * gelu
        dinner = 0.7978845608028654 * (1.0 + 0.134145 * av * av)
        ga1[t] = g1[t] * b1[t] * (0.5 * (1.0 + th) + 0.5 * av * (1.0 - th * th) * dinner)
    return ga, gb


def reference(g, a, b):
    a_ = a.clone().requires_grad_(True)
    gelu = torch.nn.functional.gelu(a_, approximate="tanh")
    (grad_a,) = torch.autograd.grad(gelu, a_, g * b)
    return grad_a, g * gelu.detach()


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
