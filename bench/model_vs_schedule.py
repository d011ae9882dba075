"""The performance model against the TPU compiler's own estimate, for every kernel this repository has.

Every example, test and conformance kernel (its first shape set) is compiled on each chip at a few configs:
the model's two best after a short search, and the kernel's default config. The test kernels' shapes are tiny
(every point would be dispatch-dominated), so each is also run with its dimensions of 64 or more scaled up
(--scale, by value: equal dimensions stay equal; the largest factor up to it that still compiles). Per point it prints the model's
estimate of the kernel's time on the device (its per-call dispatch overhead left out: the compiler does not
see it), the TPU compiler's estimate (compiler/tune/schedule.py: libtpu's simulated cycles on v5e/v6e, the
bundles it schedules on v7x), their ratio and what bounds the model's estimate; per kernel, whether the two
rank the configs alike. Points whose model estimate is mostly the call's dispatch overhead are flagged
("dispatch") and left out, and those the model finds bound by the per-step overhead ("overhead": libtpu's
simulator charges a small step ~1.4x what the published v5e measurements show) are reported apart; the goals
are about the compute- or DMA-bound rest; v7x has no simulator, so its compiler figure is the
compute-issue bound (bundles issued, or the MXU peak) and is compared with the model's compute time only (MXU
and vector work after their overlap: no DMA, no per-step waits).

Results of the compiler are kept in a tuning store (the raw simulated time is floored at the roofline when it
is read, so a change of the floor needs no new simulation) (default: the user cache dir's
helion-ls/schedule-bench.sqlite, --store), keyed like any tuning result, so a second run only models.
All figures are ESTIMATES for the named chip: the model's and the TPU compiler's.

    python bench/model_vs_schedule.py [--chips v5e v6e] [-k NAME ...] [--configs 3] [--no-conformance]
        [--cached | --skip-dispatch] [--nested] [--all] [--json PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import compiler  # noqa: E402
from compiler.api import Kernel  # noqa: E402
from compiler.ir.config import Config  # noqa: E402
from compiler.ir.specs import ArgSpec, TensorSpec  # noqa: E402
from compiler.support.diagnostics import CompileError  # noqa: E402
from compiler.tune.evaluators import Problem, ScheduleEvaluator  # noqa: E402
from compiler.tune.executors import InlineExecutor  # noqa: E402
from compiler.tune.kernel_space import KernelSpace  # noqa: E402
from compiler.tune.keys import TrialKey  # noqa: E402
from compiler.tune.model import estimate  # noqa: E402
from compiler.tune.refine import stored_outcomes  # noqa: E402
from compiler.tune.schedule import roofline  # noqa: E402
from compiler.tune.search import search  # noqa: E402
from compiler.tune.store import TuningStore, default_store_path  # noqa: E402

GOAL_POINTS = 30
GOAL_WITHIN = 0.25  # the model within ±25 % of the compiler ...
GOAL_SHARE = 0.90  # ... on at least 90 % of the points that are not dispatch-dominated
GOAL_PAIRS = 0.90  # rank order right on at least 90 % of pairs
TIE = 0.02  # the compiler's two figures within 2 %: either order is right
SOURCES = ("examples", "tests/kernels", "tests/conformance/kernels")


@dataclass
class Point:
    source: str  # file, relative to the repository
    kernel: str
    chip: str
    config: dict
    args: str
    device: float  # the model's estimate of the time on the device (s): its estimate less its dispatch overhead
    dispatch: float  # the model's per-call overhead (s)
    bound: str
    issue: float = 0.0  # the model's compute time (s): what a compute-issue bound compares with
    compiler: float | None = None
    method: str = ""
    error: str | None = None
    per_step: float = 0.0
    utilisation: dict = field(default_factory=dict)
    tag: str = ""  # " (dims ×N)" for a test kernel's scaled-up shape

    @property
    def model(self) -> float:
        """The model's figure to compare: its time on the device, or for a compute-issue bound (no DMA, no
        waits in it) its compute time: MXU and vector work after their overlap."""
        return self.issue if self.method == "issue" else self.device

    @property
    def kind(self) -> str:
        """"dispatch": the model's estimate is mostly the call's dispatch overhead (left out); "overhead": the
        model finds it bound by the per-step overhead, which libtpu's simulator puts ~1.4x above the published
        v5e measurements (128³ matmul steps); "bound": compute- or DMA-bound, what the goals are about."""
        if self.dispatch >= self.device:
            return "dispatch"
        return "overhead" if self.bound == "overhead" else "bound"

    @property
    def ratio(self) -> float | None:
        return self.model / self.compiler if self.compiler else None

    @property
    def name(self) -> str:
        name = f"{Path(self.source).stem}:{self.kernel}" if Path(self.source).stem != self.kernel else self.kernel
        return name + self.tag


def kernel_files(conformance: bool) -> Iterator[Path]:
    for folder in SOURCES:
        if folder.startswith("tests/conformance") and not conformance:
            continue
        yield from sorted((REPO / folder).glob("*.py"))


def rejected(source: str) -> bool:
    """A conformance case that must be refused (no right answer): nothing to time."""
    return any(line.startswith("REJECT") for line in source.splitlines())


def scaled(kernel: Kernel, args: dict[str, ArgSpec], chip: str, factor: int) -> dict[str, ArgSpec] | None:
    """`args` with every dimension of 64 or more times the largest power of two up to `factor` that compiles
    with the default config; None when none does (or nothing is that large)."""
    while factor > 1:
        out = {
            n: TensorSpec(s.dtype_name, tuple(d * factor if d >= 64 else d for d in s.shape))
            if isinstance(s, TensorSpec) else s
            for n, s in args.items()
        }
        if out != args:
            try:
                kernel.compile(args=out, chip=chip, emit=False)
                return out
            except CompileError:
                pass
        factor //= 2
    return None


def configs_for(kernel: Kernel, problem: Problem, n: int, nested: bool = False) -> list[Config]:
    """The model's best n-1 configs after a short search, and the kernel's default config; nested: and the
    model's best config with a nested emit_pipeline, when the search met one and it is not among them."""
    space = KernelSpace(problem, kernel, kernel.config_space(problem.args, problem.chip))
    default = kernel.default_config(problem.args, problem.chip)
    seeds = [default] + ([kernel.decorator_config] if kernel.decorator_config is not None else [])
    result = search(space, space.evaluate, executor=InlineExecutor(), seeds=space.seed_points(seeds),
                    max_evals=48, max_restarts=2, seed=0)
    ranked = sorted((r for r in result.evaluated if r.score is not None), key=lambda r: r.score)
    out: list[Config] = []
    for r in ranked:
        if len(out) >= n - 1:
            break
        if Config(dict(r.config)) not in out:
            out.append(Config(dict(r.config)))
    if Config(dict(default)) not in out:
        out.append(Config(dict(default)))
    out = out[:n]
    if nested:
        piped = [Config(dict(r.config)) for r in ranked if "emit_pipeline" in str(r.config.get("pallas_loop_type"))]
        if piped and piped[0] not in out:
            out.append(piped[0])
    return out


def model_point(problem: Problem, config: Config, source: str) -> Point | None:
    try:
        ck = problem.compile(config)
    except CompileError:
        return None
    if ck.vmem.verdict == "out_of_vmem":
        return None
    est = estimate(ck.plan, ck.chip)
    b = est.breakdown
    device = est.seconds - b["launch"]
    issue = b["compute"]
    return Point(source, problem.kernel, problem.chip, dict(config), problem.shape_key, device, b["launch"],
                 est.bound, issue=issue)


def compiler_figure(
    point: Point, problem: Problem, store: TuningStore | None, key: TrialKey, cached_only: bool = False
) -> None:
    """The TPU compiler's estimate of the point: from the store, else computed (and stored)."""
    known = stored_outcomes(store, key)
    outcome = known.get(Config(point.config))
    if outcome is None and cached_only:
        return
    if outcome is None:
        ck = problem.compile(point.config)
        m = ScheduleEvaluator().measure(ck)
        outcome = m.outcome()
        if store is not None:
            store.record_trial(key, point.config, m.seconds, "ok" if m.seconds is not None else "failed",
                               outcome[1])
    seconds, info = outcome
    if seconds is not None and info.get("simulated_seconds"):  # a stored result: today's roofline floor
        ck = problem.compile(point.config, emit=False)
        seconds = max(info["simulated_seconds"], roofline(ck.plan, ck.chip.hbm_bandwidth, ck.chip.bf16_flops))
    point.compiler = seconds
    point.method = info.get("method", "")
    point.error = info.get("error")
    point.per_step = sum((info.get("bundles_per_step") or {}).values())
    point.utilisation = info.get("utilisation") or {}


def pairs_right(points: list[Point]) -> tuple[int, int]:
    """(pairs the model orders as the compiler does, pairs) among a kernel's points with a compiler figure."""
    usable = [p for p in points if p.compiler]
    right = total = 0
    for a, b in itertools.combinations(usable, 2):
        if a.method != b.method:  # a simulated time and an issue bound are not the same quantity
            continue
        total += 1
        tie = abs(a.compiler / b.compiler - 1) <= TIE
        right += tie or (a.model < b.model) == (a.compiler < b.compiler)
    return right, total


def _us(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:.1f}" if seconds < 1e-2 else f"{seconds * 1e6:.0f}"


def _short(config: dict) -> str:
    return Config(config).short() if config else "default"


def kernel_points(args: argparse.Namespace, store: TuningStore | None, text: str, rel: str, kernel: Kernel,
                  chip: str, shape: dict[str, ArgSpec], tag: str = "") -> list[Point]:
    problem = Problem(text, kernel.name, shape, chip, rel, 0)
    try:
        configs = configs_for(kernel, problem, args.configs, args.nested)
    except CompileError:
        return []
    key = TrialKey(kernel.source_hash, problem.shape_key, chip, "schedule")
    out = []
    for config in configs:
        point = model_point(problem, config, rel)
        if point is None:
            continue
        point.tag = tag
        if not args.model_only:
            start = time.monotonic()
            # dispatch-dominated points are left out of the goals: with --skip-dispatch only stored figures
            cached = args.cached or (args.skip_dispatch and point.kind == "dispatch")
            compiler_figure(point, problem, store, key, cached)
            if args.verbose:
                print(f"  {point.name} {chip} {problem.shape_key[:40]} {_short(point.config)}: {_us(point.compiler)} "
                      f"µs ({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)
        out.append(point)
    return out


def run(args: argparse.Namespace) -> list[Point]:
    store = TuningStore(args.store) if args.store != "none" else None
    points: list[Point] = []
    for path in kernel_files(args.conformance):
        text = path.read_text()
        if rejected(text):
            continue
        rel = str(path.relative_to(REPO))
        module = compiler.load(text)
        for kernel in module.kernels.values():
            if args.k and not any(k in f"{rel}:{kernel.name}" for k in args.k):
                continue
            if not kernel.shape_sets:
                continue
            for chip in args.chips:
                first = kernel.shape_sets[0]
                points += kernel_points(args, store, text, rel, kernel, chip, first)
                bigger = scaled(kernel, first, chip, args.scale) if rel.startswith("tests/kernels") else None
                if bigger is not None:
                    factor = next(b // a for n, s in first.items() if isinstance(s, TensorSpec)
                                  for a, b in zip(s.shape, bigger[n].shape, strict=True) if b != a)
                    points += kernel_points(args, store, text, rel, kernel, chip, bigger, f" (dims ×{factor})")
    if store is not None:
        store.close()
    return points


def report(points: list[Point], chips: list[str], everything: bool) -> bool:
    print("Model vs the TPU compiler's own estimate (all figures are ESTIMATES for the named chip; µs on the "
          "device, the model's dispatch overhead left out)")
    print()
    print("| kernel | chip | config | model µs | compiler µs | model/compiler | model bound | compiler | ranks |")
    print("|---|---|---|--:|--:|--:|---|---|---|")
    groups: dict[tuple[str, str, str], list[Point]] = {}
    for p in points:
        groups.setdefault((p.source, p.kernel, p.chip), []).append(p)
    for (_, _, chip), group in groups.items():
        shown = [p for p in group if everything or p.kind != "dispatch"]
        right, total = pairs_right([p for p in group if p.kind == "bound"])
        for i, p in enumerate(shown):
            ratio = f"{p.ratio:.2f}" if p.ratio else "-"
            how = p.method + ("" if p.kind == "bound" else f" · {p.kind}")
            if p.error:
                how = f"failed: {p.error[:60]}"
            ranks = f"{right}/{total} pairs" if i == 0 and total else ""
            print(f"| {p.name} | {chip} | `{_short(p.config)}` | {_us(p.model)} | {_us(p.compiler)} | {ratio} "
                  f"| {p.bound} | {how} | {ranks} |")
    return all([summary(chip, [p for p in points if p.chip == chip], groups) for chip in chips])


def _agreement(points: list[Point]) -> str:
    within = sum(abs(math.log(p.ratio)) <= math.log1p(GOAL_WITHIN) for p in points)
    if not points:
        return "none"
    geo = math.exp(sum(math.log(p.ratio) for p in points) / len(points))
    return f"{within} of {len(points)} within ±{GOAL_WITHIN:.0%} ({within / len(points):.0%}), geometric mean {geo:.2f}"


def summary(chip: str, rows: list[Point], groups: dict[tuple[str, str, str], list[Point]]) -> bool:
    usable = [p for p in rows if p.compiler]
    failed = [p for p in rows if not p.compiler]
    by_kind = {k: [p for p in usable if p.kind == k] for k in ("bound", "overhead", "dispatch")}
    pairs = {k: [0, 0] for k in by_kind}
    for (_, _, c), group in groups.items():
        if c != chip:
            continue
        for k in pairs:
            right, total = pairs_right([p for p in group if p.kind == k])
            pairs[k][0] += right
            pairs[k][1] += total
    bound = by_kind["bound"]
    share = sum(abs(math.log(p.ratio)) <= math.log1p(GOAL_WITHIN) for p in bound) / len(bound) if bound else 0.0
    pair_share = pairs["bound"][0] / pairs["bound"][1] if pairs["bound"][1] else 1.0
    print(f"\n{chip}: {len(usable)} kernel·config points with a compiler estimate ({len(failed)} without: "
          f"libtpu rejected or could not compile them)")
    for kind, label in (("bound", "compute- or DMA-bound"), ("overhead", "bound by the per-step overhead"),
                        ("dispatch", "dispatch-dominated (left out)")):
        group = by_kind[kind]
        methods = ", ".join(f"{m} {sum(p.method == m for p in group)}" for m in ("simulated", "issue")
                            if any(p.method == m for p in group))
        print(f"  {label}: {len(group)} points ({methods or '-'}); model {_agreement(group)}; "
              f"rank order {pairs[kind][0]} of {pairs[kind][1]} pairs right")
    if chip in ("v7x", "v4"):
        return True  # compared with an issue bound: reported, no goal
    met = len(usable) >= GOAL_POINTS and share >= GOAL_SHARE and pair_share >= GOAL_PAIRS
    print(f"  {'met' if met else 'NOT MET'}: ≥ {GOAL_POINTS} points; compute- or DMA-bound: ≥ {GOAL_SHARE:.0%} "
          f"within ±{GOAL_WITHIN:.0%}, ≥ {GOAL_PAIRS:.0%} of pairs in order")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chips", nargs="+", default=["v5e", "v6e"], help="chips (v7x: issue-bound comparison)")
    parser.add_argument("-k", action="append", help="only kernels whose 'file:kernel' contains this")
    parser.add_argument("--configs", type=int, default=3, help="configs per kernel (default 3)")
    parser.add_argument("--scale", type=int, default=16, help="test kernels also at dims up to this many times larger")
    parser.add_argument("--no-conformance", dest="conformance", action="store_false")
    parser.add_argument("--store", default=str(default_store_path().with_name("schedule-bench.sqlite")),
                        help="tuning store for the compiler's results ('none': keep nothing)")
    parser.add_argument("--model-only", action="store_true", help="only the model (no libtpu)")
    parser.add_argument("--cached", action="store_true", help="compiler figures from the store only (no libtpu)")
    parser.add_argument("--nested", action="store_true",
                        help="also each kernel's best config with a nested emit_pipeline, as the model ranks them")
    parser.add_argument("--skip-dispatch", action="store_true",
                        help="no libtpu for points the model finds dispatch-dominated (stored figures still used)")
    parser.add_argument("--json", metavar="PATH", help="also write the points as JSON")
    parser.add_argument("--all", action="store_true", help="also list the dispatch-dominated points")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    points = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps([p.__dict__ for p in points], indent=1))
    return 0 if report(points, args.chips, args.all) else 1


if __name__ == "__main__":
    sys.exit(main())
