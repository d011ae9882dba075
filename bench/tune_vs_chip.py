"""The tuner's picks against what the chip finds fastest, from bench/tpu_measure.py runs with the sweep group.

For each kernel of the sweep: the configs measured (the model-only tuner's pick when the sweep was planned, the
default, configs drawn across the space), the best of them, and the pick of the model-only tuner as it is now (the
model may have been refitted since) with its measured time over the best (issue 29: within 1.05x, over at least 30
configs) — measured in the sweep or in a --tuned run's trials, else "not measured"; and the model against every
measured point (±20 % on 90 % of the points; 95 % of the pairs the chip separates by more than 3 % in the chip's
order), and how often the chip orders two configs as the model does by how far apart the model puts them (what
ModelConstants.resolution is read off). The model's figures are compared without the launch term: the tpu
evaluator times loops of pipelined calls. With --tuned, the winners of `helion-pallas tune --evaluator tpu --json`
on the same chip against the sweep's best (within 1.02x). Then the same bars on points the model's fit did not see
(issue 41): the sweep's points, each judged by constants refitted without its fold (5 folds) and without its kernel's
shape (calibrate.held_out over every fit point of the chip), and, with --new-shapes, points measured at other shapes
(bench/chip_new_shapes.py), judged by the model as it is (it says how many of them its fit has seen). Model figures are ESTIMATES for the named chip.

    python bench/tune_vs_chip.py RUN.json [RUN2.json ...] [--tuned TUNE.json ...] [--new-shapes NEW.json ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import published  # noqa: E402
from calibrate import (  # noqa: E402
    DEFAULT_PARAMS,
    SEPARATION,
    HeldOut,
    Modelled,
    compile_point,
    geomean_error,
    held_out,
    separated_pairs,
)
from published import REPO, Point  # noqa: E402
from tpu_measure import model_pick, report_fits  # noqa: E402

PICK_BAR, POINT_BAR, SHARE_BAR, PAIR_BAR = 1.05, 0.20, 0.90, 0.95
TUNED_BAR = 1.02  # issue 29: a tpu-evaluator winner within 1.02x of the best measured


def whole_space(record: dict, chip: str) -> int | None:
    """How many configs of the record's kernel at its shapes the VMEM report lets through, when the space is small
    enough to count (a sweep that tried all of them has measured the whole space), else None."""
    import itertools
    import math

    import compiler

    kernel = compiler.load((REPO / record["file"]).read_text()).kernels[record["kernel"]]
    specs = kernel.resolve_args(record["args"])
    space = kernel.config_space(specs, chip)
    names = [n for n, _ in space.dimensions]
    if math.prod(len(values) for _, values in space.dimensions) > 200:
        return None
    return sum(report_fits(kernel, specs, dict(space.to_config(dict(zip(names, values, strict=True)))), chip)
               for values in itertools.product(*(values for _, values in space.dimensions)))  # fmt: skip


def current_pick(record: dict, chip: str) -> dict | None:
    """The model-only tuner's pick for the record's kernel and shapes with the model as it is now (what
    `helion-pallas tune --chip CHIP` reports, the gate included)."""
    import compiler

    kernel = compiler.load((REPO / record["file"]).read_text()).kernels[record["kernel"]]
    return model_pick(record["file"], record["kernel"], kernel.resolve_args(record["args"]), chip)


def measured_seconds(config: dict, points: list[Modelled], tuned: list[dict]) -> float | None:
    """`config`'s measured seconds: in the sweep, else among the trials of a --tuned run; None when neither has it."""
    from compiler.ir.config import Config

    want = Config(config)
    for m in points:
        if Config(m.point.config) == want:
            return m.seconds
    return next((t["seconds"] for result in tuned for t in result.get("top", []) if Config(t["config"]) == want), None)


def tuned_results(paths: list[str]) -> list[dict]:
    """Every `tune --json` result in the files (a file holds one or a list)."""
    out: list[dict] = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        out += data if isinstance(data, list) else [data]
    return out


def sweep_points(paths: list[str]) -> tuple[str, dict[str, list[Modelled]], dict[str, list[dict]]]:
    """The chip; per kernel, every sweep point measured on it; per kernel, every sweep record (the ones the chip
    rejected too). A run in interpret mode is refused."""
    chips, by_kernel, tried = set(), defaultdict(list), defaultdict(list)
    for path in paths:
        data = json.loads(Path(path).read_text())
        if data.get("interpret"):
            sys.exit(f"{path} was measured in interpret mode on a CPU: its times say nothing about a TPU")
        chips.add(data["chip"])
        for m in data["points"]:
            if m["group"] == "sweep":
                tried[m["kernel"]].append(m)
            if m["group"] != "sweep" or m.get("seconds") is None:
                continue
            point = Point("sweep", m["file"], m["kernel"], m["args"], m["config"], 0, m["label"], seconds=m["seconds"])
            by_kernel[m["kernel"]].append(compile_point(point, data["chip"]))
    if len(chips) != 1:
        sys.exit(f"the runs are of {len(chips)} chips ({', '.join(sorted(chips))}): give runs of one")
    return chips.pop(), by_kernel, tried


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="bench/tpu_measure.py JSON files (the sweep group)")
    parser.add_argument("--tuned", nargs="+", default=[], metavar="JSON",
                        help="`helion-pallas tune --evaluator tpu --json` results on the same chip: each measured "
                             "winner against the sweep's best for its kernel (issue 29: within 1.02x)")  # fmt: skip
    parser.add_argument("--new-shapes", nargs="+", default=[], metavar="JSON",
                        help="bench/chip_new_shapes.py runs on the same chip: the model against shapes no fit saw")
    parser.add_argument("--no-held-out", action="store_true", help="skip the refits on held-out folds (minutes)")
    args = parser.parse_args(argv)
    chip, by_kernel, tried = sweep_points(args.runs)
    tuned = tuned_results(args.tuned)
    print(f"The model-only tuner's picks against the best measured config, on {chip} (model figures are estimates)")
    print(f"{'kernel':<14} {'configs':>7} {'best measured':>14} {'pick':>11} {'pick/best':>9}  best config; pick now")
    met, within, measured, total_pairs, right_pairs = True, 0, 0, 0, 0
    for kernel, points in sorted(by_kernel.items()):
        points = [Modelled(m.point, m.plan, m.seconds, dispatch=False) for m in points]
        best = min(points, key=lambda m: m.seconds)
        pick = current_pick(tried[kernel][0], chip)
        seconds = None if pick is None else measured_seconds(pick, points, [t for t in tuned if t["kernel"] == kernel])
        ratio = seconds / best.seconds if seconds is not None else float("nan")
        space = None if len(points) >= 30 else whole_space(tried[kernel][0], chip)
        whole = space is not None and len(tried[kernel]) >= space  # every config the VMEM report lets through
        enough = len(points) >= 30 or whole
        met &= seconds is not None and ratio <= PICK_BAR and enough
        note = "" if len(points) >= 30 else (f"  (the whole space: {space} configs fit, {len(tried[kernel])} tried)"
                                             if whole else "  (fewer than 30 configs)")
        shown = f"{seconds * 1e3:>8.3f} ms" if seconds is not None else f"{'not measured':>11}"
        print(f"{kernel:<14} {len(points):>7} {best.seconds * 1e3:>11.3f} ms {shown} {ratio:>8.3f}x  "
              f"{best.point.config}; {pick}" + note)
        within += sum(abs(m.error()) <= POINT_BAR for m in points)
        measured += len(points)
        found = separated_pairs(points)
        total_pairs, right_pairs = total_pairs + len(found), right_pairs + sum(right for _, _, right in found)
    share = within / measured if measured else 0.0
    order = right_pairs / total_pairs if total_pairs else 0.0
    print(f"model within ±{POINT_BAR:.0%}: {within} of {measured} points ({share:.1%}; bar {SHARE_BAR:.0%})")
    print(f"pairs separated by more than {SEPARATION - 1:.0%} in the chip's order: {right_pairs} of {total_pairs} "
          f"({order:.1%}; bar {PAIR_BAR:.0%})")
    print(f"every pick within {PICK_BAR}x of the best of >= 30 configs: {'met' if met else 'NOT MET'}")
    resolution(chip, by_kernel)
    tuned_met = tuned_against_sweep(tuned, chip, by_kernel)
    held_met = True
    if not args.no_held_out:
        held_met = held_out_sweep(chip, by_kernel)
    if args.new_shapes:
        held_met &= new_shapes(args.new_shapes, chip)
    return 0 if met and tuned_met and held_met and share >= SHARE_BAR and order >= PAIR_BAR else 1


def held_out_sweep(chip: str, by_kernel: dict[str, list[Modelled]]) -> bool:
    """The sweep's points judged by constants fitted without them (calibrate.held_out over the chip's fit points,
    the sweep's among them); whether both splits meet the bars."""
    from compiler.ir.config import Config
    from compiler.tune.constants import constants_for

    fitted = [compile_point(p, chip) for p in published.points(chip, "fit")]
    swept = {(m.point.kernel, m.point.args, repr(Config(m.point.config))) for ms in by_kernel.values() for m in ms}
    judged = [m for m in fitted if (m.point.kernel, m.point.args, repr(Config(m.point.config))) in swept]
    print(f"held out: the {len(judged)} of {chip}'s {len(fitted)} fit points whose kernel, shapes and config a sweep "
          f"measured (other tables' points of those configs included), each judged by a refit "
          f"({', '.join(DEFAULT_PARAMS)}) that did not see it")
    met = True
    for how in ("kfold", "shape"):
        result = held_out(fitted, constants_for(chip), DEFAULT_PARAMS, how, judged)
        print("  " + result.line(), flush=True)
        met &= result.met
    return met


def new_shapes(paths: list[str], chip: str) -> bool:
    """The model as it is against points measured at shapes no fit saw (bench/chip_new_shapes.py), per kernel and in
    all; whether the bars are met."""
    groups: dict[tuple[str, str], list[Modelled]] = defaultdict(list)
    for path in paths:
        data = json.loads(Path(path).read_text())
        if data.get("interpret") or data["chip"] != chip:
            sys.exit(f"{path}: not a TPU run on {chip}")
        for m in data["points"]:
            if m.get("seconds") is None:
                continue
            point = Point("new", m["file"], m["kernel"], m["args"], m["config"], 0, m["label"], seconds=m["seconds"])
            c = compile_point(point, chip)
            groups[(m["kernel"], m["args"])].append(Modelled(c.point, c.plan, c.seconds, dispatch=False))
    fit = {(p.kernel, p.args, json.dumps(p.config, sort_keys=True)) for p in published.points(chip, "fit")}
    seen = sum((m.point.kernel, m.point.args, json.dumps(m.point.config, sort_keys=True)) in fit
               for group in groups.values() for m in group)
    print(f"new shapes, the model as it is on {chip}: " + (f"{seen} of these points are in its fit (published.py): "
          "held out, calibrate.py --held-out judges them" if seen else "no fit saw them"))
    total = within = pairs = ordered = 0
    errors = []
    for (kernel, args), group in sorted(groups.items()):
        errs = [m.error() for m in group]
        found = separated_pairs(group)
        total, within = total + len(group), within + sum(abs(e) <= POINT_BAR for e in errs)
        pairs, ordered = pairs + len(found), ordered + sum(ok for _, _, ok in found)
        errors += errs
        fastest = min(group, key=lambda m: m.seconds)
        print(f"  {kernel:<14} {args:<72} {len(group)} configs, fastest {fastest.seconds * 1e3:9.4f} ms, model "
              f"{', '.join(f'{100 * e:+.0f}%' for e in errs)}")
    result = HeldOut("new shape", total, within, pairs, ordered, geomean_error(errors))
    print("  " + result.line())
    return result.met


GAPS = (0.0, 0.03, 0.05, 0.10, math.inf)  # the model's predicted gap between two configs, binned


def resolution(chip: str, by_kernel: dict[str, list[Modelled]]) -> None:
    """How often the chip orders two configs of a kernel as the model does, by how far apart the model puts them:
    what ModelConstants.resolution is read off (below it tuning does not act on the model's order)."""
    from compiler.tune.constants import constants_for

    agree, total = [0] * (len(GAPS) - 1), [0] * (len(GAPS) - 1)
    for points in by_kernel.values():
        models = [(Modelled(m.point, m.plan, m.seconds, dispatch=False).model(), m.seconds) for m in points]
        for (ma, sa), (mb, sb) in itertools.combinations(models, 2):
            (fast, fast_s), (slow, slow_s) = sorted([(ma, sa), (mb, sb)])
            i = next(i for i in range(len(GAPS) - 1) if slow / fast - 1 < GAPS[i + 1])
            total[i] += 1
            agree[i] += fast_s <= slow_s
    print(f"the chip's order of two configs the model puts this far apart (tuning acts on "
          f"{constants_for(chip).resolution:.0%} or more on {chip}):")
    for i in range(len(GAPS) - 1):
        upper = f"{GAPS[i + 1]:.0%}" if math.isfinite(GAPS[i + 1]) else "more"
        share = agree[i] / total[i] if total[i] else 0.0
        print(f"  {GAPS[i]:.0%} to {upper}: {agree[i]} of {total[i]} pairs ({share:.0%})")


def tuned_against_sweep(tuned: list[dict], chip: str, by_kernel: dict[str, list[Modelled]]) -> bool:
    """Print each tpu-evaluator winner (a `tune --json` result) over the best the sweep measured for its kernel;
    whether every one is within TUNED_BAR (True when none is given)."""
    met = True
    for result in tuned:
        kernel, best = result["kernel"], result.get("best")
        if result["chip"] != chip or result["evaluator"] != "tpu" or best is None or kernel not in by_kernel:
            sys.exit(f"not a tpu-evaluator winner of a swept kernel on {chip}: {kernel}, "
                     f"{result['evaluator']} on {result['chip']}")
        swept = min(m.seconds for m in by_kernel[kernel])
        ratio = best["seconds"] / swept
        met &= ratio <= TUNED_BAR
        print(f"tuned on the chip: {kernel} {best['config']} {best['seconds'] * 1e3:.3f} ms measured, "
              f"{ratio:.3f}x the sweep's best ({'within' if ratio <= TUNED_BAR else 'NOT within'} {TUNED_BAR}x)")
    return met


if __name__ == "__main__":
    sys.exit(main())
