"""Measure, on a machine with a TPU, what the performance model is calibrated against, and write it as JSON
for bench/calibrate.py.

What it measures (the kernels of this repository, compiled by our compiler, timed by the `tpu` evaluator:
warm-up calls, then the median of device-synchronised calls):
  seed     flash attention (examples/attention.py) at 8k and 32k with each strategy (emit_pipeline on the
           seed's [2, 1024, 2048] blocks, unroll and fori_loop on [2, 512, 2048]); configs that do not fit
           VMEM are recorded as such, not run
  kernels  softmax, batch_softmax, bmm and rms_norm backward at the seed's shapes, each with its default
           config and the config the model tunes for this chip
  matmul   the matmul table of the JAX Pallas TPU guide (bench/kernels/matmul.py: plain, transposed RHS,
           fused ReLU; 1024-8192 with (128, 128, 128) and (512, 1024, 1024) blocks, plus 2048)
  picks    the model-only tuner's pick as it is now for each sweep kernel (--kernels), and the picks no sweep
           measured (UNMEASURED_PICKS), recorded in group "sweep" so that tune_vs_chip reads them beside the sweeps
  sweep    every example and bench/kernels/matmul.py at the shapes of issue 29's table (SWEEP), each with the
           model-only tuner's pick, its default and --sweep configs drawn across its space (a fixed seed; small
           blocks included, configs the VMEM report rules out redrawn): what says whether the tuner's pick is
           within 1.05x of the best the chip finds, and what a fit of the model needs (bench/tune_vs_chip.py)
Every config is first put through the correctness gate (reduced shapes against the eager reference); one
that is wrong is recorded with its verdict and not timed. Each point records the model's estimate beside
the measurement.

    python bench/tpu_measure.py [--out FILE.json] [--only seed kernels matmul sweep] [--repeats 20]
    python bench/tpu_measure.py --only sweep --kernels softmax add --out part1.json   # one command's worth
    python bench/tune_vs_chip.py part1.json part2.json  # the tuner's picks against the best measured
    python bench/tpu_measure.py --only picks --kernels bmm matmul --out $OUT/v5e_picks.json  # picks not measured
    python bench/calibrate.py --measured FILE.json      # fit the chip's constants to it

--interpret runs the same logic on a CPU in TPU interpret mode (--chip required; times say nothing about a
TPU and bench/calibrate.py refuses them); --tiny uses small shapes (the test of this script does both).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from published import MATMUL, REPO, points  # noqa: E402

SEED_KERNELS = ("softmax", "batch_softmax", "bmm", "rms_norm_bwd")
GROUPS = ("seed", "kernels", "matmul", "sweep", "picks")
# Model-only picks on v5e that no sweep measured, so tune_vs_chip cannot judge the 1.05x bar for their kernel
# (docs/model-accuracy.md, 2026-12-07): matmul's ties the measured best in the model; bmm's was the pick from cefba2d
# until the VMEM report counted what libtpu holds of an unrolled dot (after that the pick is the measured best).
UNMEASURED_PICKS = {
    "bmm": [{"block_sizes": [1, 1024, 512, 512], "pallas_loop_type": "unroll"}],
    "matmul": [{"block_sizes": [512, 1024, 4096], "pallas_loop_type": "unroll"}],
}
# issue 29's table: kernel -> (file, shapes, tiny shapes for a CPU run of the logic)
SWEEP = {
    "attention": ("examples/attention.py", "q=bf16[8, 32, 8192, 256], k=bf16[8, 32, 8192, 256], v=bf16[8, 32, 8192, 256]",
                  "q=f32[1, 2, 256, 128], k=f32[1, 2, 256, 128], v=f32[1, 2, 256, 128]"),
    "bmm": ("examples/bmm.py", "a=bf16[64, 2048, 2048], b=bf16[64, 2048, 2048]", "a=f32[2, 256, 256], b=f32[2, 256, 256]"),
    "matmul": (MATMUL, "x=bf16[8192, 8192], y=bf16[8192, 8192]", "x=f32[256, 256], y=f32[256, 256]"),
    "softmax": ("examples/softmax.py", "x=bf16[65536, 2560]", "x=f32[512, 256]"),
    "batch_softmax": ("examples/batch_softmax.py", "x=bf16[64, 2048, 4096]", "x=f32[2, 128, 256]"),
    "rms_norm_bwd": ("examples/rms_norm_bwd.py",
                     "grad_out=f32[8192, 8192], x=f32[8192, 8192], weight=f32[8192], rstd=f32[8192, 1]",
                     "grad_out=f32[256, 256], x=f32[256, 256], weight=f32[256], rstd=f32[256, 1]"),
    "add": ("examples/add.py", "x=bf16[16384, 16384], y=bf16[16384, 16384]", "x=f32[256, 512], y=f32[256, 512]"),
}


@dataclass
class Target:
    """One kernel at one shape and config to measure (the JSON keeps these fields per point)."""

    group: str
    file: str
    kernel: str
    args: str
    config: dict[str, Any]
    size: int
    label: str
    extra: dict[str, Any] = field(default_factory=dict)


def _attention_targets(tiny: bool) -> Iterator[Target]:
    from compiler.tune.constants import SEED_PIPELINE, SEED_UNROLL

    lengths = (256,) if tiny else (8192, 32768)
    batch, heads, dim, dtype = (1, 2, 128, "f32") if tiny else (8, 32, 256, "bf16")
    pipeline = [1, 128, 128] if tiny else SEED_PIPELINE["block_sizes"]
    resident = [1, 128, 128] if tiny else SEED_UNROLL["block_sizes"]
    for s in lengths:
        args = ", ".join(f"{n}={dtype}[{batch}, {heads}, {s}, {dim}]" for n in "qkv")
        length = f"{s // 1024}k" if s >= 1024 else str(s)
        for strategy, blocks in (("emit_pipeline", pipeline), ("unroll", resident), ("fori_loop", resident)):
            yield Target("seed", "examples/attention.py", "attention", args,
                         {"block_sizes": blocks, "pallas_loop_type": strategy}, s, f"{length} {strategy}")
    if tiny:  # the seed's one out-of-VMEM point, compiled (never run) so that the tiny run records one too
        args = ", ".join(f"{n}=bf16[8, 32, 32768, 256]" for n in "qkv")
        yield Target("seed", "examples/attention.py", "attention", args, dict(SEED_UNROLL), 32768,
                     "32k unroll (compiled only)")


def _kernel_targets(chip: str, tiny: bool, tune_evals: int) -> Iterator[Target]:
    import compiler
    from compiler.ir.specs import format_args
    from compiler.reference import load_module
    from compiler.tune.driver import TuneOptions, tune
    from compiler.tune.evaluators import Problem

    for name in SEED_KERNELS:
        path = REPO / "examples" / f"{name}.py"
        source = path.read_text()
        kernel = compiler.load(source).kernels[name]
        if tiny:
            small = load_module(source, filename=str(path)).namespace["SMALL"]
            specs = kernel.resolve_args(small)
        else:
            specs = kernel.shape_sets[0]
        args = format_args(specs)
        configs = {"default": dict(kernel.default_config(specs, chip))}
        result = tune(Problem(source, name, specs, chip, str(path)), TuneOptions(max_evals=tune_evals, verify=False))
        if result.best is not None and compiler.Config(result.best.config) != compiler.Config(configs["default"]):
            configs["tuned"] = result.best.config
        for which, config in configs.items():
            yield Target("kernels", f"examples/{name}.py", name, args, config, 0, which)


def _matmul_targets(tiny: bool) -> Iterator[Target]:
    if tiny:
        for kernel, blocks in (("matmul", [128, 128, 128]), ("matmul", [128, 256, 256]),
                               ("matmul_rhs_t", [128, 128, 128]), ("matmul_relu", [128, 128, 128])):  # fmt: skip
            yield Target("matmul", MATMUL, kernel, "x=f32[256, 256], y=f32[256, 256]",
                         {"block_sizes": blocks, "pallas_loop_type": "emit_pipeline"}, 256, f"256^3 blocks {blocks}")
        return
    seen = set()
    for p in points():
        if p.file != MATMUL:
            continue
        key = (p.kernel, p.args, json.dumps(p.config, sort_keys=True))
        if key not in seen:
            seen.add(key)
            yield Target("matmul", p.file, p.kernel, p.args, dict(p.config), p.size, p.label)


def _sweep_targets(chip: str, tiny: bool, tune_evals: int, count: int, kernels: list[str] | None) -> Iterator[Target]:
    import random

    import compiler
    from compiler.ir.specs import format_args

    for name, (file, args, small) in SWEEP.items():
        if kernels and name not in kernels:
            continue
        kernel = compiler.load((REPO / file).read_text()).kernels[name]
        specs = kernel.resolve_args(small if tiny else args)
        picked = model_pick(file, name, specs, chip, tune_evals)
        chosen = {"model pick": picked} if picked is not None else {}
        default = dict(kernel.default_config(specs, chip))
        if repr(compiler.Config(default)) not in {repr(compiler.Config(c)) for c in chosen.values()}:
            chosen["default"] = default
        space, rng = kernel.config_space(specs, chip), random.Random(f"{name} {chip}")
        seen = {repr(compiler.Config(c)) for c in chosen.values()}
        fixed = len(chosen)
        for _ in range(40 * count):
            if len(chosen) >= count + fixed:
                break
            config = space.to_config({n: rng.choice(values) for n, values in space.dimensions})
            if repr(config) in seen:
                continue
            seen.add(repr(config))
            if report_fits(kernel, specs, dict(config), chip):
                chosen[f"sample {len(chosen) - fixed + 1}"] = dict(config)
        for label, config in chosen.items():
            yield Target("sweep", file, name, format_args(specs), config, 0, label)


def model_pick(file: str, name: str, specs: dict[str, Any], chip: str, max_evals: int | None = None) -> dict | None:
    """The model-only tuner's pick for a kernel of this repository, as `helion-pallas tune --chip CHIP` reports it:
    its winner has passed the correctness gate (max_evals None: the command's default budget); None when no
    config did."""
    from compiler.tune.driver import TuneOptions, tune
    from compiler.tune.evaluators import Problem

    path = REPO / file
    result = tune(Problem(path.read_text(), name, specs, chip, str(path)), TuneOptions(max_evals=max_evals))
    return dict(result.best.config) if result.best is not None else None


def report_fits(kernel: Any, specs: dict[str, Any], config: dict[str, Any], chip: str) -> bool:
    """The config compiles and the VMEM report does not rule it out: a config a sweep may draw."""
    from compiler.support.diagnostics import CompileError

    try:
        return kernel.compile(args=specs, config=config, chip=chip, emit=False).vmem.verdict != "out_of_vmem"
    except CompileError:
        return False


def targets(chip: str, groups: list[str], tiny: bool, tune_evals: int, sweep: int = 30,
            kernels: list[str] | None = None) -> list[Target]:
    out: list[Target] = []
    if "seed" in groups:
        out += _attention_targets(tiny)
    if "kernels" in groups:
        out += _kernel_targets(chip, tiny, tune_evals)
    if "matmul" in groups:
        out += _matmul_targets(tiny)
    if "sweep" in groups:
        out += _sweep_targets(chip, tiny, tune_evals, sweep, kernels)
    if "picks" in groups:
        out += _pick_targets(chip, tiny, kernels)
    return out


def measure(target: Target, chip: str, interpret: bool, warmup: int, repeats: int) -> dict[str, Any]:
    """Compile, check, time and model one target: its JSON record. A target from --plan carries the CPU gate's
    verdict, so the chip's time goes to the chip's work."""
    import compiler
    from compiler.ir.chips import get_chip
    from compiler.support.diagnostics import CompileError
    from compiler.tune.evaluators import get_evaluator, time_calls
    from compiler.tune.model import estimate

    record: dict[str, Any] = asdict(target) | {"seconds": None}
    kernel = compiler.load((REPO / target.file).read_text()).kernels[target.kernel]
    specs = kernel.resolve_args(target.args)
    try:
        ck = kernel.compile(args=specs, config=target.config, chip=chip)
    except CompileError as exc:
        return record | {"status": "compile error", "error": "; ".join(d.message for d in exc.diagnostics)}
    record |= {"config": dict(ck.config), "flops": ck.plan.flops, "hbm_bytes": ck.plan.hbm_bytes,
               "vmem_bytes": ck.vmem.total_bytes,
               "model_seconds": estimate(ck.plan, get_chip(chip)).seconds}  # fmt: skip
    if ck.vmem.verdict == "out_of_vmem":
        return record | {"status": "out of VMEM"}
    planned = target.extra.get("cpu_correctness")
    verdict, message = (planned["verdict"], planned["message"]) if planned else _gate(kernel, specs, ck, chip)
    record["correctness"] = verdict
    if verdict not in ("ok", "unverified") and (interpret or not planned):
        return record | {"status": f"not timed: {verdict} ({message})"}
    # a planned target the CPU gate failed still goes to the chip: whether the chip agrees is a finding
    if interpret:
        from compiler.reference import make_inputs

        inputs = make_inputs(specs, seed=0)
        times = time_calls(lambda: ck(*[a.clone() if hasattr(a, "clone") else a for a in inputs]), warmup, repeats)
        seconds = statistics.median(times)
        return record | {"status": "measured (interpret mode, CPU)", "seconds": seconds, "min_seconds": min(times),
                         "repeats": repeats}  # fmt: skip
    evaluator = get_evaluator("tpu")  # one per process: it keeps the inputs the configs of a problem share
    evaluator.warmup = warmup
    m = evaluator.measure(ck)
    if m.seconds is None:  # the chip's compiler rejected it, or it ran wrong on the chip
        return record | {"status": f"not timed: {m.error}", "chip_correctness": m.metrics.get("chip_correctness")}
    timing = {k: m.metrics[k] for k in ("min_seconds", "median_seconds", "spread", "repeats", "calls_per_loop",
                                        "device_kind", "chip_correctness")}  # fmt: skip
    return record | {"status": "measured", "seconds": m.seconds} | timing


def _gate(kernel: Any, specs: dict[str, Any], ck: Any, chip: str) -> tuple[str, str]:
    """The tuner's correctness gate on `ck`'s config (reduced shapes, interpret mode, the eager reference)."""
    from compiler.ir.chips import get_chip
    from compiler.tune.correctness import check_config

    check = check_config(kernel, specs, dict(ck.config), get_chip(chip))
    return check.verdict, check.message


def plan(chip: str, found: list[Target], out: Path) -> None:
    """Write `found` with the CPU gate's verdict on each: what a TPU run then only measures (--plan)."""
    import compiler
    from compiler.support.diagnostics import CompileError

    done: list[dict[str, Any]] = []
    for target in found:
        kernel = compiler.load((REPO / target.file).read_text()).kernels[target.kernel]
        specs = kernel.resolve_args(target.args)
        try:
            ck = kernel.compile(args=specs, config=target.config, chip=chip, emit=False)
        except CompileError:
            ck = None  # measure() records the compile error
        if ck is not None and ck.vmem.verdict != "out_of_vmem":
            verdict, message = _gate(kernel, specs, ck, chip)
            target.extra["cpu_correctness"] = {"verdict": verdict, "message": message}
        done.append(asdict(target))
        out.write_text(json.dumps({"tool": "bench/tpu_measure.py --plan-out", "chip": chip, "targets": done},
                                  indent=1))
        print(f"planned {target.kernel} {target.label}: {target.extra.get('cpu_correctness', {}).get('verdict')}",
              flush=True)


def planned_targets(path: Path, chip: str, kernels: list[str] | None) -> list[Target]:
    """The targets a --plan-out run wrote (for `chip`), those of `kernels` only if given."""
    data = json.loads(path.read_text())
    if data["chip"] != chip:
        sys.exit(f"tpu_measure: {path} was planned for {data['chip']}, this run is for {chip}")
    return [Target(**t) for t in data["targets"] if not kernels or t["kernel"] in kernels]


def _identity(target: dict[str, Any]) -> str:
    """What makes a target the same one in a resumed run: its group, kernel, shapes and label (a record's config
    is the compiled one, with every default written out)."""
    return json.dumps([target["group"], target["kernel"], target["args"], target["label"]])


def detect_chip() -> str:
    """The chip jax sees (compiler.ir.chips name), or exit with why not."""
    from compiler.tpu.runtime import ChipBusy, claim_tpu, machine_chip, tpu_device

    try:
        if not claim_tpu():
            sys.exit("tpu_measure: no TPU on this machine (use --interpret --chip NAME to exercise the script)")
        name = machine_chip()
    except ChipBusy as exc:
        sys.exit(f"tpu_measure: {exc}")
    if name is None:
        sys.exit(f"tpu_measure: jax sees {tpu_device().device_kind!r}, which compiler.ir.chips does not know")
    return name


def _pick_targets(chip: str, tiny: bool, kernels: list[str] | None) -> Iterator[Target]:
    """Each sweep kernel's model-only pick as `helion-pallas tune --chip CHIP` makes it now (its default budget, as
    tune_vs_chip asks), and on v5e the picks no sweep measured; as sweep points, so tune_vs_chip judges the bar."""
    import compiler
    from compiler.ir.specs import format_args

    for name in kernels or list(SWEEP):
        file, args, small = SWEEP[name]
        kernel = compiler.load((REPO / file).read_text()).kernels[name]
        specs = kernel.resolve_args(small if tiny else args)
        picked = model_pick(file, name, specs, chip)
        chosen = {"model pick now": picked} if picked is not None else {}
        for config in () if tiny or chip != "v5e" else UNMEASURED_PICKS.get(name, ()):
            if repr(compiler.Config(config)) not in {repr(compiler.Config(c)) for c in chosen.values()}:
                chosen["unmeasured pick of 2026-12-07"] = config
        for label, config in chosen.items():
            yield Target("sweep", file, name, format_args(specs), config, 0, label)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="JSON file to write (default: tpu_measure_<chip>_<date>.json)")
    parser.add_argument("--only", nargs="+", choices=GROUPS, help="measure only these groups")
    parser.add_argument("--chip", help="the chip (default: the TPU jax sees; required with --interpret)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20,
                        help="timed calls per point with --interpret (on a TPU the tpu evaluator's loops decide)")
    parser.add_argument("--tune-evals", type=int, default=150, help="model evaluations for the tuned configs")
    parser.add_argument("--interpret", action="store_true", help="CPU, TPU interpret mode: logic only")
    parser.add_argument("--tiny", action="store_true", help="small shapes")
    parser.add_argument("--sweep", type=int, default=30, help="configs drawn per kernel in the sweep group")
    parser.add_argument("--kernels", nargs="+", choices=sorted(SWEEP), help="the sweep group's kernels (default all)")
    parser.add_argument("--plan-out", metavar="FILE",
                        help="choose the targets (model-only tuning, the sampled configs) and run the CPU gate on "
                             "each, write them to FILE and stop: no TPU needed (with --chip)")  # fmt: skip
    parser.add_argument("--plan", metavar="FILE", help="measure the targets a --plan-out run wrote")
    parser.add_argument("--resume", metavar="FILE",
                        help="an earlier run's JSON, cut short: keep its points and measure only the targets it lacks "
                             "(a sweep too long for one command goes on in the next)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.plan_out and not args.chip:
        parser.error("--plan-out needs --chip")
    if args.interpret or args.plan_out:
        if not args.chip:
            parser.error("--interpret needs --chip")
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    from compiler.ir.chips import canonical_name

    chip = canonical_name(args.chip) if args.chip else detect_chip()
    groups = args.only or [g for g in GROUPS if g != "picks"]  # picks: asked for by name
    if args.plan_out:
        plan(chip, targets(chip, groups, args.tiny, args.tune_evals, args.sweep, args.kernels), Path(args.plan_out))
        return 0
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out_path = Path(args.out or f"tpu_measure_{chip}_{date[:10]}.json")
    import jax

    records: list[dict[str, Any]] = []
    payload = {
        "tool": "bench/tpu_measure.py",
        "chip": chip,
        "interpret": args.interpret,
        "date": date,
        "jax": jax.__version__,
        "devices": sorted({d.device_kind for d in jax.devices()}),
        "warmup": args.warmup,
        "repeats": args.repeats,
        "points": records,
    }
    found = (planned_targets(Path(args.plan), chip, args.kernels) if args.plan
             else targets(chip, groups, args.tiny, args.tune_evals, args.sweep, args.kernels))  # fmt: skip
    if args.resume:
        earlier = json.loads(Path(args.resume).read_text())
        if earlier["chip"] != chip or bool(earlier.get("interpret")) != args.interpret:
            sys.exit(f"tpu_measure: {args.resume} was measured on {earlier['chip']}"
                     + (" in interpret mode" if earlier.get("interpret") else "") + ": not this run's to resume")
        records += earlier["points"]
        done = {_identity(r) for r in records}
        found = [t for t in found if _identity(asdict(t)) not in done]
    for target in found:
        record = measure(target, chip, args.interpret, args.warmup, args.repeats)
        records.append(record)
        out_path.write_text(json.dumps(payload, indent=1))  # after every point: a run cut short keeps what it has
        seconds = f"{record['seconds'] * 1e3:10.4f} ms" if record["seconds"] is not None else " " * 13
        model = record.get("model_seconds")
        print(f"{target.group:<8} {target.kernel + ' ' + target.label:<56} {seconds}  {record['status']}"
              + (f" (model {model * 1e3:.4f} ms)" if model else ""), flush=True)  # fmt: skip
    out_path.write_text(json.dumps(payload, indent=1))
    measured = sum(r["seconds"] is not None for r in records)
    print(f"{measured} of {len(records)} points measured on {chip}"
          + (" (INTERPRET MODE: not TPU times)" if args.interpret else "") + f"; wrote {out_path}")  # fmt: skip
    print(f"next: python bench/calibrate.py --measured {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
