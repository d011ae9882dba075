"""Written the way upstream Helion's pretuned kernels pass scales (no shape lines): 0-d tensor arguments made
with `torch.tensor(...)`, a reduction to 0-d (`torch.mean(x).to(...)`, `x.abs().max()`) and an optional 0-d
bound left out (None), read in the kernel with `hl.load(s, [])` and `s[()]`; a 0-d total written back."""

from __future__ import annotations

import helion
import helion.language as hl
import torch
from helion._testing import DEVICE


@helion.kernel(static_shapes=True)
def clamp_scale(x: torch.Tensor, scale: torch.Tensor, bound: torch.Tensor | None, eps: float) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tile_m in hl.tile(m):
        s = hl.load(scale, []).to(torch.float32) + eps
        for tile_n in hl.tile(n):
            v = x[tile_m, tile_n].to(torch.float32) * s
            if bound is not None:
                v = v.clamp(max=bound[()])
            out[tile_m, tile_n] = v
    return out


@helion.kernel(static_shapes=True)
def add_total(x: torch.Tensor, total: torch.Tensor) -> None:
    for tile_m in hl.tile(x.size(0)):
        hl.atomic_add(total, [], x[tile_m, :].to(torch.float32).sum())


def make_inputs(m: int, n: int) -> tuple[torch.Tensor, ...]:
    x = torch.randn(m, n, device=DEVICE, dtype=torch.bfloat16)
    bound = torch.mean(x).to(torch.float32)
    return x, torch.tensor(0.5, device=DEVICE), bound


def main() -> None:
    for m, n in [(16, 256), (64, 512)]:
        x, scale, bound = make_inputs(m, n)
        clamp_scale(x, scale, bound, 1e-6)
        clamp_scale(x, x.abs().max(), None, 1e-6)
    total = torch.zeros((), device=DEVICE)
    add_total(torch.randn(32, 128, device=DEVICE), total)


if __name__ == "__main__":
    main()
