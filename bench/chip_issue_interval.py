"""Measure the issue interval on a TPU: how fast the host issues jitted calls, apart from what the chip does with them.

The v5e model's `issue_interval` (compiler/tune/constants.py, 0.123 ms) was fitted to kernels that all ran at
0.110-0.133 ms a pipelined call whatever their bytes or grid steps (bench/chip/v5e_new_shapes.json). This script
pins what that floor is, with the tpu evaluator's own timing (time_pipelined), for calls that do next to nothing:

- "issue": seconds per call of the loop of calls alone, before its one wait (the host's side);
- "pipelined": the tpu evaluator's figure (loop of calls, one wait at the end), best of its loops;
- "waited": one call waited for at a time (what call_overhead models).

Cases: an XLA `x + 1` on 8x128 floats (no Pallas), the examples' add at [8, 128] (one grid step), softmax at
[4096, 2560] (a floor point), and rms_norm_bwd f32[2048, 2048] as generated and without its trailing `jnp.sum` of
the partial rows (the one example 0.06 ms above the floor). If "issue" is ~0.12 ms for all of them, the floor is the
host's dispatch; if "issue" is small and "pipelined" still ~0.12 ms, it is the chip's per-call cost.

    OUT=/some/dir python bench/chip_issue_interval.py      # on the TPU machine; writes $OUT/v5e_issue_interval.json
    python bench/chip_issue_interval.py --cpu --out x.json  # the same logic on a CPU, tiny shapes, interpret mode
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from published import REPO  # noqa: E402

# case -> (file, kernel, shapes on the TPU, shapes on a CPU)
CASES: dict[str, tuple[str, str, str, str]] = {
    "add [8, 128]": ("examples/add.py", "add", "x=f32[8, 128], y=f32[8, 128]", "x=f32[8, 128], y=f32[8, 128]"),
    "softmax [4096, 2560]": ("examples/softmax.py", "softmax", "x=bf16[4096, 2560]", "x=f32[16, 256]"),
    "rms_norm_bwd [2048, 2048]": ("examples/rms_norm_bwd.py", "rms_norm_bwd",
                                  "grad_out=f32[2048, 2048], x=f32[2048, 2048], weight=f32[2048], rstd=f32[2048, 1]",
                                  "grad_out=f32[64, 256], x=f32[64, 256], weight=f32[256], rstd=f32[64, 1]"),
}
TRAILING_SUM = "jnp.sum(grad_w_partial, axis=0)"  # rms_norm_bwd's host-side reduction in the generated code


def timings(call: Callable[[], Any], loops: int = 5) -> dict[str, float]:
    """issue / pipelined / waited seconds per call of `call` (which returns jax arrays)."""
    import jax

    from compiler.tune.evaluators import time_calls, time_on_device

    times, k = time_on_device(call)
    issue = []
    for _ in range(loops):
        start = time.perf_counter()
        out = None
        for _ in range(k):
            out = call()
        issue.append((time.perf_counter() - start) / k)
        jax.block_until_ready(out)
    waited = time_calls(lambda: jax.block_until_ready(call()), 3, 20)
    return {"issue": min(issue), "pipelined": min(times), "waited": min(waited), "calls_per_loop": k}


def kernel_call(file: str, kernel: str, args: str, chip: str, cpu: bool, drop_sum: bool = False) -> Callable[[], Any]:
    """A no-argument call of `kernel`'s generated code at `args` (default config), inputs already on the device."""
    import compiler
    from compiler.reference import make_inputs
    from compiler.tpu.runtime import load_entry, to_jax, tpu_device

    k = compiler.load((REPO / file).read_text()).kernels[kernel]
    specs = k.resolve_args(args)
    ck = k.compile(args=specs, config=k.default_config(specs, chip), chip=chip)
    source = ck.source
    if drop_sum:
        if TRAILING_SUM not in source:
            raise SystemExit(f"{kernel}: the generated code has no {TRAILING_SUM!r} any more")
        source = source.replace(TRAILING_SUM, "grad_w_partial")
    fn = load_entry(source, ck.entry, f"<pallas {kernel}>")
    device = None if cpu else tpu_device()  # on the chip: an array left on the CPU runs on jax's CPU backend
    inputs = make_inputs(ck.call_specs, seed=0)
    arrays = [to_jax(v, n, device) for n, v in zip(ck.call_specs, inputs, strict=True)]
    if not cpu:
        return lambda: fn(*arrays)
    from jax.experimental.pallas import tpu as pltpu

    params = pltpu.InterpretParams()
    return lambda: fn(*arrays, interpret=params)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="interpret mode on a CPU, tiny shapes (no TPU times)")
    parser.add_argument("--chip", default=None, help="with --cpu: the chip to compile for (default v5e)")
    parser.add_argument("--out", default=None, help="the JSON to write (default $OUT/<chip>_issue_interval.json)")
    args = parser.parse_args(argv)
    import contextlib

    import jax
    import jax.numpy as jnp

    from compiler.ir.chips import get_chip
    from compiler.tpu.runtime import chip_context, machine_chip

    chip = (args.chip or "v5e") if args.cpu else machine_chip()
    if chip is None:
        raise SystemExit("no TPU here: run on the TPU machine, or pass --cpu")
    out = Path(args.out) if args.out else Path(os.environ["OUT"]) / f"{chip}_issue_interval.json"
    record: dict[str, Any] = {"tool": "bench/chip_issue_interval.py", "chip": chip, "interpret": args.cpu,
                              "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                              "jax": jax.__version__, "devices": [d.device_kind for d in jax.devices()], "cases": {}}
    x = jnp.zeros((8, 128), jnp.float32)
    plus_one = jax.jit(lambda a: a + 1)
    record["cases"]["xla x + 1 [8, 128]"] = timings(lambda: plus_one(x))
    context = chip_context(get_chip(chip)) if args.cpu else contextlib.nullcontext()
    with context:
        for name, (file, kernel, shapes, cpu_shapes) in CASES.items():
            args_ = cpu_shapes if args.cpu else shapes
            record["cases"][name] = timings(kernel_call(file, kernel, args_, chip, args.cpu))
            if kernel == "rms_norm_bwd":
                call = kernel_call(file, kernel, args_, chip, args.cpu, drop_sum=True)
                record["cases"][name + " without the trailing sum"] = timings(call)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(record, indent=1))
    for name, t in record["cases"].items():
        print(f"{name:<52} issue {t['issue'] * 1e3:8.4f} ms  pipelined {t['pipelined'] * 1e3:8.4f} ms  "
              f"waited {t['waited'] * 1e3:8.4f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
