"""Written the way upstream Helion's pretuned kernels drive themselves (no shape lines): `main()` imports the
harness `run_sweep` from `_bench` (pretuned_kernels/_bench.py, beside the kernel's folder) and hands it the
shapes, de-duplicated with `dict.fromkeys`, and `make_calls(shape)`, which builds the inputs and returns a
zero-argument `helion_call` with the torch baselines."""

from __future__ import annotations

import helion
import helion.language as hl
import torch
import torch.nn.functional as F


@helion.aot_kernel()
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = x[tile_m, :].to(torch.float32)
        inv_rms = torch.rsqrt(torch.mean(acc * acc, dim=-1) + eps)
        out[tile_m, :] = (acc * inv_rms[:, None] * weight[:].to(torch.float32)).to(x.dtype)
    return out


def _baselines() -> list[tuple[str, object]]:
    return [("torch", lambda x, w: F.rms_norm(x, [x.size(1)], w)), ("torch_compile", torch.compile(F.rms_norm))]


def main(verbose: bool = True) -> dict:
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _bench import run_sweep

    small = [(256, 1024), (256, 2048)]
    again = [(256, 2048), (512, 768)]
    shapes = list(dict.fromkeys(small + again))
    baselines = _baselines()

    def make_calls(shape: tuple[int, int]) -> tuple:
        m, n = shape
        x = torch.randn([m, n], device="cuda", dtype=torch.bfloat16)
        weight = torch.randn([n], device="cuda", dtype=torch.bfloat16)

        def helion_call() -> torch.Tensor:
            return rms_norm(x, weight)

        base_calls = [(name, (lambda fn=fn: fn(x, weight))) for name, fn in baselines]
        return helion_call, base_calls, f"{m:>8d}  {n:>6d}"

    return run_sweep(shapes, make_calls, use_cudagraph=False, verbose=verbose, shape_header="M N")


if __name__ == "__main__":
    main()
