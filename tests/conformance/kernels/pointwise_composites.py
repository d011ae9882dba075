"""Pointwise torch functions that torch composes from basic ones (softplus with beta/threshold, elu, selu, celu,
leaky_relu, hardtanh, relu6, hardsigmoid, hardswish, mish, logsigmoid, softsign, tanhshrink, threshold, sinh,
cosh, log10, erfc, tanh-approximated gelu, logaddexp, hypot, xlogy): each matches torch's own definition."""
import helion
import helion.language as hl
import torch
import torch.nn.functional as F


def inputs():
    g = torch.Generator().manual_seed(31)
    x = torch.randn(16, 128, generator=g) * 4
    x[0, :8] = torch.tensor([0.0, -0.0, 30.0, -30.0, 2.9, -3.1, 1e-3, -1e-3])
    return [x, torch.rand(16, 128, generator=g) + 0.1]


@helion.kernel(static_shapes=True)
def composites(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([23, m, n], dtype=x.dtype, device=x.device)
    for tm, tn in hl.tile([m, n]):
        v = x[tm, tn]
        w = y[tm, tn]
        out[0, tm, tn] = F.softplus(v)
        out[1, tm, tn] = F.softplus(v, beta=2.0, threshold=5.0)
        out[2, tm, tn] = F.elu(v, alpha=0.5)
        out[3, tm, tn] = F.selu(v)
        out[4, tm, tn] = F.celu(v, alpha=2.0)
        out[5, tm, tn] = F.leaky_relu(v, 0.2)
        out[6, tm, tn] = F.hardtanh(v, -2.0, 3.0)
        out[7, tm, tn] = F.relu6(v)
        out[8, tm, tn] = F.hardsigmoid(v)
        out[9, tm, tn] = F.hardswish(v)
        out[10, tm, tn] = F.mish(v)
        out[11, tm, tn] = F.logsigmoid(v)
        out[12, tm, tn] = F.softsign(v)
        out[13, tm, tn] = F.tanhshrink(v)
        out[14, tm, tn] = F.threshold(v, 0.5, -1.0)
        out[15, tm, tn] = torch.sinh(v * 0.25)
        out[16, tm, tn] = torch.cosh(v * 0.25)
        out[17, tm, tn] = torch.log10(w)
        out[18, tm, tn] = torch.erfc(v)
        out[19, tm, tn] = F.gelu(v, approximate="tanh")
        out[20, tm, tn] = torch.logaddexp(v, w)
        out[21, tm, tn] = torch.hypot(v, w)
        out[22, tm, tn] = torch.xlogy(torch.relu(v), w)
    return out


def reference(x, y):
    return torch.stack([
        F.softplus(x), F.softplus(x, beta=2.0, threshold=5.0), F.elu(x, alpha=0.5), F.selu(x), F.celu(x, alpha=2.0),
        F.leaky_relu(x, 0.2), F.hardtanh(x, -2.0, 3.0), F.relu6(x), F.hardsigmoid(x), F.hardswish(x), F.mish(x),
        F.logsigmoid(x), F.softsign(x), F.tanhshrink(x), F.threshold(x, 0.5, -1.0), torch.sinh(x * 0.25),
        torch.cosh(x * 0.25), torch.log10(y), torch.erfc(x), F.gelu(x, approximate="tanh"), torch.logaddexp(x, y),
        torch.hypot(x, y), torch.xlogy(torch.relu(x), y),
    ])


TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}
