"""What each `dot_precision` costs and buys on a TPU: an f32 matmul kernel (tests/kernels/matmul.py) compiled
with "tf32" (three bf16 passes written out) and "ieee" (Precision.HIGHEST), beside XLA's own f32 dot at
DEFAULT (one bf16 pass: what upstream Helion's Pallas backend gives every setting) and HIGHEST.

Prints milliseconds, TF/s, the time as a multiple of the one-pass dot, and the largest error against torch's
f32 product on the CPU. Needs a TPU (the timings mean nothing in interpret mode).

    python bench/dot_precision.py [--size 4096] [--blocks 512,512,512] [--repeats 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--blocks", default="512,512,512")
    parser.add_argument("--repeats", type=int, default=20)
    ns = parser.parse_args(argv)
    import jax
    import jax.numpy as jnp
    import torch

    import compiler
    from compiler.tpu.runtime import claim_tpu, machine_chip, to_jax, to_torch, tpu_device
    from compiler.tune.evaluators import time_calls

    if not claim_tpu():
        sys.exit("dot_precision: no TPU here")
    chip, device = machine_chip(), tpu_device()
    n = ns.size
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
    want = x @ y
    flops = 2.0 * n**3
    xa, ya = to_jax(x, "x", device), to_jax(y, "y", device)
    rows = []
    for name, precision in (("XLA f32 DEFAULT (one bf16 pass)", jax.lax.Precision.DEFAULT),
                            ("XLA f32 HIGHEST", jax.lax.Precision.HIGHEST)):
        f = jax.jit(lambda a, b, p=precision: jnp.dot(a, b, precision=p))
        rows.append((name, statistics.median(time_calls(lambda f=f: jax.block_until_ready(f(xa, ya)), 3, ns.repeats)),
                     float((to_torch(f(xa, ya)) - want).abs().max())))
    source = (REPO / "tests/kernels/matmul.py").read_text().replace(
        "# helion: args(x=f32[256, 512], y=f32[512, 256])", f"# helion: args(x=f32[{n}, {n}], y=f32[{n}, {n}])")
    blocks = [int(b) for b in ns.blocks.split(",")]
    for setting in ("tf32", "ieee"):
        os.environ["HELION_DOT_PRECISION"] = setting
        ck = compiler.load(source).kernels["matmul"].compile(config={"block_sizes": blocks}, chip=chip)
        fn = compiler.tpu.runtime.load_entry(ck.source, ck.entry)
        seconds = statistics.median(time_calls(lambda fn=fn: jax.block_until_ready(fn(xa, ya)), 3, ns.repeats))
        rows.append((f"kernel dot_precision={setting!r}", seconds, float((to_torch(fn(xa, ya)) - want).abs().max())))
    base = rows[0][1]
    print(f"f32 {n}x{n}x{n} on {device.device_kind}; error = max |result - torch f32 on the CPU| "
          f"(values ~N(0, {n}))")
    for name, seconds, error in rows:
        print(f"{name:38s} {seconds * 1e3:9.3f} ms  {flops / seconds / 1e12:7.1f} TF/s  {seconds / base:5.2f}x  "
              f"error {error:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
