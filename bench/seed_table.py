"""The seed's table beside the model's predictions, and what the tuner picks for every seed kernel.

1. Flash attention [8, 32, S, 256] bf16 on v7x, strategies x lengths: the seed's measured TF/s and the
   model's estimate for the configs the seed ran (compiler/tune/constants.py SEED_POINTS), plus the config
   the tuner chose and its estimate.
2. The other seed kernels: tuned config, estimated time, TF/s or GB/s, the roofline bound and the ratio of
   the tuned kernel to it, beside the seed's measured speed-ups over PyTorch eager / torch.compile.
All model figures are ESTIMATES for v7x (one TensorCore), not measurements.

    python bench/seed_table.py [--max-evals N] [--verify] [--fit] [--fit-llo]

--fit re-derives the fitted model constants from the seed points (vector rate from `unroll` at 8k, loop
overlap from `emit_pipeline` at 32k) and shows how well the third point is then predicted. --fit-llo also
compiles the seed's 8k `unroll` config with libtpu (about 30 s) to derive llo_vector_op_seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

import compiler  # noqa: E402
from compiler.ir.chips import get_chip  # noqa: E402
from compiler.tune.constants import SEED_POINTS, SEED_SPEEDUPS, V7X, ModelConstants  # noqa: E402
from compiler.tune.driver import TuneOptions, tune  # noqa: E402
from compiler.tune.evaluators import Problem  # noqa: E402
from compiler.tune.model import estimate  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
CHIP = get_chip("v7x")
OTHER_KERNELS = ("softmax", "batch_softmax", "bmm", "rms_norm_bwd")


def load(name: str) -> tuple[str, compiler.Kernel]:
    source = (EXAMPLES / f"{name}.py").read_text()
    return source, compiler.load(source).kernels[name]


def tuned(name: str, shape_set: int, args: argparse.Namespace):
    source, kernel = load(name)
    problem = Problem(
        source, name, kernel.shape_sets[shape_set], "v7x", str(EXAMPLES / f"{name}.py"), shape_set
    )
    return tune(problem, TuneOptions(max_evals=args.max_evals, verify=args.verify))


def attention_table(args: argparse.Namespace) -> None:
    _, kernel = load("attention")
    lengths = {0: "S=8k", 1: "S=32k"}
    print("Flash attention [8, 32, S, 256] bf16, non-causal, TPU v7x — TF/s (model figures are estimates)")
    print(
        f"{'strategy':<16} {'config (seed ran)':<22} "
        + "".join(f"{'seed ' + s:>12} {'model':>9} {'ratio':>7}" for s in lengths.values())
    )
    for strategy in ("emit_pipeline", "unroll"):
        points = {p.shape_set: p for p in SEED_POINTS if p.config["pallas_loop_type"] == strategy}
        cells = ""
        for index in lengths:
            p = points[index]
            ck = kernel.compile(shape_set=index, config=p.config)
            if ck.vmem.verdict == "out_of_vmem":
                model = f"OOM ({ck.vmem.total_bytes / 2**20:.0f} MiB of VMEM)"
                cells += f"{_seed(p.tflops):>12} {model:>25}"
                continue
            est = estimate(ck.plan, CHIP)
            ratio = f"{est.tflops / p.tflops:.3f}" if p.tflops else "-"
            cells += f"{_seed(p.tflops):>12} {est.tflops:9.1f} {ratio:>7}"
        blocks = str(points[0].config["block_sizes"])
        print(f"{strategy:<16} {blocks:<22} {cells}")
    print("\nTuned by the model (pattern search from the default config):")
    for index, length in lengths.items():
        result = tuned("attention", index, args)
        best = result.best
        print(
            f"  {length:<6} {best.metrics['tflops']:7.1f} TF/s est. = {best.seconds * 1e3:8.3f} ms, "
            f"{100 * best.metrics['roofline_fraction']:.1f}% of the roofline bound "
            f"({est_bound(best) * 1e3:.2f} ms)  {_cfg(best.config)}{_checked(best)}"
        )


def others_table(args: argparse.Namespace) -> None:
    print(
        "\nOther seed kernels on v7x, tuned by the model (estimates) — seed speed-ups measured on a real v7x"
    )
    head = (
        f"{'kernel':<14} {'time':>10} {'TF/s':>7} {'GB/s':>7} {'bound':>9} {'ratio':>6}  "
        f"{'seed vs eager / compile':<24} config; shapes"
    )
    print(head)
    print("-" * len(head))
    for name in OTHER_KERNELS:
        result = tuned(name, 0, args)
        best = result.best
        m = best.metrics
        tf = f"{m['tflops']:.1f}" if m.get("tflops") else "-"
        eager, compiled = SEED_SPEEDUPS[name]
        print(
            f"{name:<14} {best.seconds * 1e3:8.3f}ms {tf:>7} {m['gbps']:7.0f} {est_bound(best) * 1e3:7.3f}ms "
            f"{m['roofline_fraction']:6.3f}  {f'{eager:.2f}x / {compiled:.2f}x':<24} {_cfg(best.config)}; "
            f"{result.problem.shape_key}{_checked(best)}"
        )
    print(
        "ratio = roofline bound / estimated time (1.0 is the chip's limit); bound = max(FLOPs / peak, "
        "compulsory bytes / HBM bandwidth)"
    )


def est_bound(best) -> float:
    return best.seconds * best.metrics["roofline_fraction"]


def fit(with_llo: bool) -> None:
    """Re-derive the fitted constants: vector rate from unroll 8k, loop overlap from emit_pipeline 32k."""
    _, kernel = load("attention")
    points = [(p, kernel.compile(shape_set=p.shape_set, config=p.config)) for p in SEED_POINTS if p.tflops]

    def errors(c: ModelConstants) -> list[float]:
        return [estimate(ck.plan, CHIP, c).tflops / p.tflops - 1 for p, ck in points]

    def rates(c: ModelConstants, vpu: float) -> ModelConstants:
        return replace(c, vpu_rate=vpu, eup_rate=vpu * V7X.eup_rate / V7X.vpu_rate)

    c = V7X
    for _ in range(3):  # the two fits barely interact; a few rounds settle both
        c = rates(c, _bisect(lambda v, c=c: errors(rates(c, v))[0], 1e11, 1e14))
        c = replace(c, overlap_loop=_bisect(lambda w, c=c: errors(replace(c, overlap_loop=w))[2], 0.0, 1.0))
    print(f"fitted vpu_rate = {c.vpu_rate:.4g} /s (constants.py: {V7X.vpu_rate:.4g})")
    print(f"fitted overlap_loop = {c.overlap_loop:.4f} (constants.py: {V7X.overlap_loop})")
    for (p, _), e in zip(points, errors(c), strict=True):
        print(f"  {p.label:<30} error {100 * e:+.2f}%")
    if with_llo:
        from compiler.tpu.libtpu_compile import tpu_compile
        from compiler.tune.evaluators import vector_seconds

        p, ck = points[0]
        result = tpu_compile(ck.source, ck.entry, ck.arg_structs(), CHIP)
        per_step = estimate(ck.plan, CHIP, c).work["vector"] / ck.plan.calls[0].grid_steps
        units = vector_seconds(result.categories, "v7x") / V7X.llo_vector_op_seconds
        print(
            f"fitted llo_vector_op_seconds = {per_step / units:.4g} s ({units:.0f} VPU-op equivalents per step "
            f"of {p.label}; constants.py: {V7X.llo_vector_op_seconds:.4g})"
        )


def _bisect(f, lo: float, hi: float, steps: int = 80) -> float:
    f_lo = f(lo)
    for _ in range(steps):
        mid = (lo + hi) / 2
        f_mid = f(mid)
        if (f_mid > 0) == (f_lo > 0):
            lo, f_lo = mid, f_mid
        else:
            hi = mid
    return (lo + hi) / 2


def _seed(tflops: float | None) -> str:
    return f"{tflops:.0f}" if tflops else "OOM"


def _cfg(config: dict) -> str:
    return repr(compiler.Config(config))


def _checked(best) -> str:
    return "" if best.correctness is None else f"  [correctness: {best.correctness.verdict}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-evals", type=int, default=200, help="model evaluations per shape set")
    parser.add_argument("--verify", action="store_true", help="run the correctness gate on each tuned config")
    parser.add_argument("--fit", action="store_true", help="re-derive the fitted model constants")
    parser.add_argument("--fit-llo", action="store_true", help="also derive llo_vector_op_seconds (libtpu)")
    args = parser.parse_args()
    if args.fit or args.fit_llo:
        fit(args.fit_llo)
        return 0
    attention_table(args)
    others_table(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
