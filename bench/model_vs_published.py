"""The performance model against every published TPU measurement it is calibrated or checked against.

For each point of bench/published.py the kernel (bench/kernels/matmul.py, examples/attention.py) is compiled
with our compiler at the measured shape and config for the measured chip, and the model estimates the plan
of that generated code. Printed per table: measured vs model per point and the error; then the rank order
of the configs within each size; the summary comes last: geometric-mean error, worst point, rank order and
the seed's figures against the goals (every point of a published table within ±25 %, geometric-mean error ≤ 12 %, rank order
right within each size of a published table, the seed's figures within ±10 %; for our own measurements on a
TPU, issue 29's bar: ±20 % on 90 % of the points, 95 % of the pairs the chip separates by more than 3 % in the
chip's order). Exit status 0 when every goal is met.

Our matmul streams K with a nested emit_pipeline, which starts cold for every output block; the measured
kernels have K as a grid axis and do not. The "restarts" column is that part of our estimate.
All model figures are ESTIMATES for the named chip.

    python bench/model_vs_published.py [--table KEY ...]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate import SEPARATION, Modelled, compile_point, geomean_error, separated_pairs  # noqa: E402
from published import REPO, TABLES, points  # noqa: E402

import compiler  # noqa: E402
from compiler.ir.chips import get_chip  # noqa: E402
from compiler.tune.constants import SEED_POINTS  # noqa: E402
from compiler.tune.model import estimate  # noqa: E402

GOAL_POINT = 0.25
GOAL_GEOMEAN = 0.12
GOAL_SEED = 0.10
# issue 29's bar for a chip we measured ourselves: within ±20 % on 90 % of the points, and 95 % of the pairs the
# chip separates by more than 3 % in the chip's order
GOAL_OWN_POINT, GOAL_OWN_SHARE, GOAL_OWN_PAIRS = 0.20, 0.90, 0.95


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.4f} ms" if seconds < 1 else f"{seconds:.3f} s"


def _name(m: Modelled) -> str:
    p = m.point
    return p.label if p.label.startswith(p.kernel) else f"{p.kernel} {p.label}"


def _ranks(group: list[Modelled]) -> tuple[list[str], list[str]]:
    """Labels of a size's points, fastest first: by measurement and by the model."""
    measured = [m.point.label for m in sorted(group, key=lambda m: m.seconds)]
    modelled = [m.point.label for m in sorted(group, key=lambda m: m.model())]
    return measured, modelled


def table_report(key: str, modelled: list[Modelled]) -> list[tuple[str, bool]]:
    """Print one table; returns (size label, rank order right) per size with more than one point."""
    t = TABLES[key]
    print(f"\n[{key}] {t.title} — TPU {t.chip}, {'fitted to' if t.role == 'fit' else 'predicted (not fitted)'}")
    print(f"  source: {t.source}")
    if t.notes:
        print(f"  measured: {t.notes}")
    print(f"  {'point':<44} {'measured':>12} {'model':>12} {'error':>7} {'restarts':>9}")
    for m in modelled:
        est = estimate(m.plan, get_chip(t.chip))
        restarts = est.breakdown["pipeline_restarts"] / est.seconds
        print(
            f"  {_name(m):<44} {_time(m.seconds):>12} {_time(m.model()):>12} "
            f"{100 * m.error():+6.1f}% {100 * restarts:8.1f}%"
        )
    ranks = []
    by_size: dict[tuple[str, int], list[Modelled]] = defaultdict(list)
    for m in modelled:
        by_size[(m.point.kernel, m.point.size)].append(m)
    for (kernel, size), group in by_size.items():
        if len(group) < 2:
            continue
        measured, model = _ranks(group)
        right = measured == model
        ranks.append((f"{key} {kernel} {size}", right))
        print(f"  rank of {kernel} at {size}: measured {' < '.join(measured)}; "
              f"model {'agrees' if right else ' < '.join(model)}")
    return ranks


def own_pairs(modelled: list[Modelled]) -> tuple[int, int, list[str]]:
    """(pairs the chip separates by more than 3 %, of those the model orders right, the wrong ones) among
    points of one kernel and size."""
    groups: dict[tuple[str, str, int], list[Modelled]] = defaultdict(list)
    for m in modelled:
        groups[(m.point.table, m.point.kernel, m.point.size)].append(m)
    found = [pair for group in groups.values() for pair in separated_pairs(group)]
    wrong = [f"{_name(a)} / {_name(b)}" for a, b, right in found if not right]
    return len(found), len(found) - len(wrong), wrong


def seed_oom() -> bool:
    """The seed's 32k `unroll` config ran out of VMEM on v7x: does our compile say so?"""
    kernel = compiler.load((REPO / "examples/attention.py").read_text()).kernels["attention"]
    (oom,) = [p for p in SEED_POINTS if p.tflops is None]
    return kernel.compile(shape_set=oom.shape_set, config=oom.config, chip="v7x").vmem.verdict == "out_of_vmem"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", nargs="+", choices=sorted(TABLES), help="only these tables")
    args = parser.parse_args()
    keys = args.table or list(TABLES)
    print("Performance model vs published TPU measurements (model figures are ESTIMATES for the named chip)")
    everything: list[Modelled] = []
    ranks: list[tuple[str, bool]] = []
    for key in keys:
        modelled = [compile_point(p, TABLES[key].chip) for p in points() if p.table == key]
        everything += modelled
        ranks += table_report(key, modelled)

    own = [m for m in everything if m.point.table.startswith("chip-")]
    errors = [m.error() for m in everything]
    geomean = geomean_error(errors)
    worst = max(everything, key=lambda m: abs(math.log1p(m.error())))
    seed = [m for m in everything if m.point.table == "seed"]
    oom = seed_oom() if "seed" in keys else True
    fitted = [m for m in everything if TABLES[m.point.table].role == "fit"]
    checked = [m for m in everything if TABLES[m.point.table].role == "check"]
    within = sum(abs(e) <= GOAL_POINT for e in errors)
    # our own measurements have issue 29's bar instead: a sweep across a space has configs the model cannot express
    others = [m for m in everything if not m.point.table.startswith("chip-")]
    others_within = sum(abs(m.error()) <= GOAL_POINT for m in others)
    published_ranks = [(label, right) for label, right in ranks if not label.startswith("chip-")]
    ranks_right = sum(right for _, right in published_ranks)
    pairs, pairs_right, pairs_wrong = own_pairs(own)
    own_within = sum(abs(m.error()) <= GOAL_OWN_POINT for m in own)
    goals = {
        f"every point of the published tables within ±{GOAL_POINT:.0%}": others_within == len(others),
        f"geometric-mean error ≤ {GOAL_GEOMEAN:.0%}": geomean <= GOAL_GEOMEAN,
        "rank order right within each size (published tables)": ranks_right == len(published_ranks),
        f"our own measurements: ±{GOAL_OWN_POINT:.0%} on {GOAL_OWN_SHARE:.0%} of the points": (
            own_within >= GOAL_OWN_SHARE * len(own)),
        f"our own measurements: {GOAL_OWN_PAIRS:.0%} of the pairs the chip separates by more than "
        f"{SEPARATION - 1:.0%} ordered": pairs_right >= GOAL_OWN_PAIRS * pairs,
        f"seed figures within ±{GOAL_SEED:.0%}, 32k unroll out of VMEM": all(
            abs(m.error()) <= GOAL_SEED for m in seed
        )
        and oom,
    }
    print("\nSummary")
    print(
        f"  {len(everything)} points on {', '.join(sorted({TABLES[k].chip for k in keys}))} "
        f"({len(fitted)} fitted to, {len(checked)} predicted); {within} within ±{GOAL_POINT:.0%}"
    )
    print(
        f"  geometric-mean error {100 * geomean:.1f}% (points fitted to "
        f"{100 * geomean_error([m.error() for m in fitted]):.1f}%, predicted points "
        f"{100 * geomean_error([m.error() for m in checked]):.1f}%)"
    )
    print(
        f"  worst point: [{worst.point.table}] {_name(worst)}: "
        f"{_time(worst.seconds)} measured, {_time(worst.model())} model ({100 * worst.error():+.1f}%)"
    )
    wrong = [label for label, right in published_ranks if not right]
    print(f"  rank order within each size of the published tables: {ranks_right} of {len(published_ranks)} right"
          + (f", wrong: {wrong}" if wrong else ""))
    if own:
        print(f"  our own measurements ({len(own)} points): {own_within} within ±{GOAL_OWN_POINT:.0%}; "
              f"{pairs_right} of {pairs} pairs the chip separates by more than {SEPARATION - 1:.0%} in its order"
              + (f"; wrong, e.g.: {'; '.join(pairs_wrong[:5])}" if pairs_wrong else ""))
    if seed:
        cells = ", ".join(
            f"{m.point.label} {m.point.tflops:.0f} → {m.plan.flops / m.model() / 1e12:.0f} TF/s "
            f"({100 * (m.seconds / m.model() - 1):+.1f}%)"
            for m in seed
        )
        print(f"  seed (v7x): {cells}; 32k unroll {'out of VMEM' if oom else 'FITS (the seed ran out of VMEM)'}")
    for goal, met in goals.items():
        print(f"  {'met' if met else 'NOT MET':>7}: {goal}")
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
