"""Measure every example at shapes the model was never fitted to, small and large (~0.05 ms to ~100 ms a call on a
TPU v5e), several configs each, and write the points in bench/chip's sweep format (bench/tpu_measure.py's JSON) for a
held-out check and a refit of the model.

Run on a machine with a TPU (jax with its libtpu; torch's CPU build for the tpu evaluator's correctness check):

    OUT=/some/dir python bench/chip_new_shapes.py [--budget 400] [--configs 4]

It writes $OUT/v5e_new_shapes.json (chip name from the TPU jax sees) after every point, so a run cut short keeps
what it has; targets are interleaved by shape, smallest first, so a short run still covers every kernel. Each
shape gets its default config, the model-only search's best (no correctness gate here: the tpu evaluator checks
every config on the chip against the eager reference before timing it) and configs drawn across its space with a
fixed seed that the VMEM report lets through. Timing is bench/tpu_measure.py's: the tpu evaluator's best of loops
of pipelined calls. Then, here:

    cp $OUT/v5e_new_shapes.json bench/chip/
    python bench/tune_vs_chip.py bench/chip/v5e_sweep_*.json --new-shapes bench/chip/v5e_new_shapes.json

tune_vs_chip prints the model as fitted against these points (none was in its fit). bench/published.py reads only
v5e_sweep_*.json into the fit; to fit to the new points too, add them there, refit (bench/calibrate.py) and judge
the result with calibrate --held-out.

--interpret --chip NAME runs the same logic on a CPU in TPU interpret mode (times say nothing about a TPU;
--tiny shrinks the shapes): what the test of this script does.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from published import MATMUL, REPO  # noqa: E402
from tpu_measure import Target, detect_chip, measure, report_fits  # noqa: E402

# kernel -> (file, shapes: small to large; v5e at 819 GB/s and 197 TF/s puts them between ~0.05 ms and ~100 ms a
# call), and the shapes of a --tiny run (interpret mode on a CPU: the script's logic only). None of these is a shape
# of bench/chip's sweeps (issue 29's table).
SHAPES: dict[str, tuple[str, list[str], list[str]]] = {
    "softmax": ("examples/softmax.py",
                ["x=bf16[4096, 2560]", "x=bf16[16384, 1024]", "x=bf16[8192, 8192]", "x=bf16[262144, 1024]"],
                ["x=f32[256, 256]"]),
    "add": ("examples/add.py",
            ["x=bf16[2048, 2048], y=bf16[2048, 2048]", "x=bf16[4096, 8192], y=bf16[4096, 8192]",
             "x=bf16[32768, 16384], y=bf16[32768, 16384]"],
            ["x=f32[256, 512], y=f32[256, 512]"]),
    "batch_softmax": ("examples/batch_softmax.py",
                      ["x=bf16[8, 1024, 2048]", "x=bf16[32, 1024, 8192]", "x=bf16[128, 4096, 2048]"],
                      ["x=f32[2, 128, 256]"]),
    "rms_norm_bwd": ("examples/rms_norm_bwd.py",
                     ["grad_out=f32[2048, 2048], x=f32[2048, 2048], weight=f32[2048], rstd=f32[2048, 1]",
                      "grad_out=f32[16384, 8192], x=f32[16384, 8192], weight=f32[8192], rstd=f32[16384, 1]"],
                     ["grad_out=f32[256, 256], x=f32[256, 256], weight=f32[256], rstd=f32[256, 1]"]),
    "bmm": ("examples/bmm.py",
            ["a=bf16[8, 1024, 1024], b=bf16[8, 1024, 1024]", "a=bf16[32, 2048, 1024], b=bf16[32, 1024, 2048]",
             "a=bf16[16, 4096, 4096], b=bf16[16, 4096, 4096]"],
            ["a=f32[2, 256, 256], b=f32[2, 256, 256]"]),
    "matmul": (MATMUL,
               ["x=bf16[2048, 2048], y=bf16[2048, 2048]", "x=bf16[4096, 16384], y=bf16[16384, 4096]",
                "x=bf16[16384, 16384], y=bf16[16384, 8192]"],
               ["x=f32[256, 256], y=f32[256, 256]"]),
    "attention": ("examples/attention.py",
                  ["q=bf16[1, 8, 2048, 128], k=bf16[1, 8, 2048, 128], v=bf16[1, 8, 2048, 128]",
                   "q=bf16[2, 16, 4096, 128], k=bf16[2, 16, 4096, 128], v=bf16[2, 16, 4096, 128]",
                   "q=bf16[4, 16, 16384, 128], k=bf16[4, 16, 16384, 128], v=bf16[4, 16, 16384, 128]"],
                  ["q=f32[1, 2, 256, 128], k=f32[1, 2, 256, 128], v=f32[1, 2, 256, 128]"]),
}
GROUP = "new shapes"  # the points' group: not "sweep", so nothing reads them as a fitted sweep by accident
SEARCH_EVALS = 80  # the model-only search per shape (static analysis: ~1 s a shape)


def shape_targets(chip: str, tiny: bool, configs: int) -> list[Target]:
    """Every kernel at every shape with `configs` configs (default, the model's best, the rest drawn), interleaved
    so that the first targets cover each shape once: the smallest shape of each kernel first."""
    import compiler
    from compiler.ir.specs import format_args
    from compiler.tune.driver import TuneOptions, tune
    from compiler.tune.evaluators import Problem

    per_shape: list[tuple[int, list[Target]]] = []  # (the shape's place among its kernel's, smallest 0; targets)
    for name, (file, shapes, small) in SHAPES.items():
        source = (REPO / file).read_text()
        kernel = compiler.load(source).kernels[name]
        for rank, args in enumerate(small if tiny else shapes):
            specs = kernel.resolve_args(args)
            chosen: dict[str, dict[str, Any]] = {"default": dict(kernel.default_config(specs, chip))}
            result = tune(Problem(source, name, specs, chip, str(REPO / file)),
                          TuneOptions(max_evals=SEARCH_EVALS, verify=False))
            if result.best is not None:
                chosen["model best"] = dict(result.best.config)
            seen = {repr(compiler.Config(c)) for c in chosen.values()}
            space, rng = kernel.config_space(specs, chip), random.Random(f"new shapes {name} {args} {chip}")
            for _ in range(40 * configs):
                if len(chosen) >= configs:
                    break
                config = dict(space.to_config({n: rng.choice(values) for n, values in space.dimensions}))
                if repr(compiler.Config(config)) in seen or not report_fits(kernel, specs, config, chip):
                    continue
                seen.add(repr(compiler.Config(config)))
                chosen[f"sample {len(chosen) - 1}"] = config
            label = f"new shape {format_args(specs)}"
            # the chip's own check (the tpu evaluator) decides what is timed: the CPU gate is not run here
            skip = {"cpu_correctness": {"verdict": "unverified", "message": "checked on the chip by the tpu evaluator"}}
            per_shape.append((rank, [Target(GROUP, file, name, format_args(specs), config, 0, f"{label} {what}",
                                            dict(skip) if not tiny else {})  # fmt: skip
                                     for what, config in chosen.items()]))
    per_shape.sort(key=lambda ranked: ranked[0])  # stable: kernels in SHAPES' order within a rank
    out: list[Target] = []
    for i in range(max(len(t) for _, t in per_shape)):
        out += [targets[i] for _, targets in per_shape if i < len(targets)]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=400.0,
                        help="seconds from the start after which no new point starts (default 400)")
    parser.add_argument("--configs", type=int, default=4, help="configs per shape (default 4)")
    parser.add_argument("--chip", help="the chip (default: the TPU jax sees; required with --interpret)")
    parser.add_argument("--interpret", action="store_true", help="CPU, TPU interpret mode: the logic only")
    parser.add_argument("--tiny", action="store_true", help="small shapes (with --interpret)")
    parser.add_argument("--out", help="the JSON file (default $OUT/<chip>_new_shapes.json)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    if args.interpret:
        if not args.chip:
            parser.error("--interpret needs --chip")
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    from compiler.ir.chips import canonical_name

    chip = canonical_name(args.chip) if args.chip else detect_chip()
    out_path = Path(args.out) if args.out else Path(os.environ.get("OUT", ".")) / f"{chip}_new_shapes.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    import jax

    records: list[dict[str, Any]] = []
    payload = {"tool": "bench/chip_new_shapes.py", "chip": chip, "interpret": args.interpret,
               "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "jax": jax.__version__,
               "devices": sorted({d.device_kind for d in jax.devices()}), "warmup": 3, "repeats": 5,
               "points": records}  # fmt: skip
    found = shape_targets(chip, args.tiny, args.configs)
    print(f"{len(found)} targets chosen in {time.monotonic() - start:.0f} s", flush=True)
    left_out = 0
    for target in found:
        if time.monotonic() - start > args.budget:
            left_out += 1
            continue
        try:
            record = measure(target, chip, args.interpret, 3, 5)
        except Exception as exc:  # noqa: BLE001 - one point's failure is recorded; the others still run
            record = asdict(target) | {"seconds": None, "status": f"failed: {type(exc).__name__}: {exc}"[:500]}
        records.append(record)
        out_path.write_text(json.dumps(payload, indent=1))
        seconds = f"{record['seconds'] * 1e3:10.4f} ms" if record["seconds"] is not None else " " * 13
        model = record.get("model_seconds")
        print(f"{target.kernel:<14} {target.label.removeprefix('new shape '):<90} {seconds}  {record['status']}"
              + (f" (model {model * 1e3:.4f} ms)" if model else ""), flush=True)  # fmt: skip
    payload["left_out"] = left_out
    out_path.write_text(json.dumps(payload, indent=1))
    measured = sum(r["seconds"] is not None for r in records)
    print(f"{measured} of {len(found)} points measured on {chip} in {time.monotonic() - start:.0f} s"
          + (f" ({left_out} left out past the budget)" if left_out else "")
          + (" (INTERPRET MODE: not TPU times)" if args.interpret else "") + f"; wrote {out_path}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
