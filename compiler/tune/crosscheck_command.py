"""`helion-pallas crosscheck`: the TPU compiler's estimate of the model's best configs, and whether it agrees.

For each kernel and shape set of a file (or -k / --shape-set / --args one) it reads the model's `--top` best
configs from the tuning store (a model tuning must have run), has the schedule evaluator estimate each one
that has no compiler result yet (stored under the evaluator "schedule", so it is done once), and prints the
comparison (crosscheck.py): agrees, disagrees (order or size, with the margins) or not comparable. The
language server runs it in the background after a model tuning finishes. --json prints the comparison as
JSON (a list when there are several); --progress jsonl writes progress events on stderr. Exit status: 0
compared, 1 nothing to compare (no model results, no libtpu, the kernel does not compile), 2 usage.
Every figure is an estimate for the named chip: the model's and the TPU compiler's, each labelled.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import skip_dynamo_import
from ..ir.chips import canonical_name
from ..ir.config import Config
from ..support.diagnostics import CompileError
from .command import USAGE, UsageError, _problems, exit_now, write_json_line
from .crosscheck import CompilerCheck, compare, latest_by_config
from .evaluators import Problem, ScheduleEvaluator
from .keys import TrialKey
from .store import StoreError, TuningStore

OK, NOTHING = 0, 1


def run(ns: argparse.Namespace) -> int:
    try:
        status = _run(ns)
    except UsageError as exc:
        print(f"helion-pallas crosscheck: error: {exc}", file=sys.stderr)
        status = USAGE
    if getattr(ns, "exit_when_done", False):
        exit_now(status)
    return status


def _run(ns: argparse.Namespace) -> int:
    try:
        chip = canonical_name(ns.chip)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    unavailable = ScheduleEvaluator().available()
    if unavailable:
        print(f"helion-pallas crosscheck: the TPU compiler cannot run: {unavailable}", file=sys.stderr)
        return NOTHING
    skip_dynamo_import()
    problems, _ = _problems(ns, chip)
    try:
        store = TuningStore(ns.store)
    except StoreError as exc:
        print(f"helion-pallas crosscheck: error: {exc}", file=sys.stderr)
        return NOTHING
    checks: list[dict[str, Any]] = []
    try:
        for problem in problems:
            check = check_problem(problem, store, max(1, ns.top), _progress(ns, problem))
            if check is None:
                print(
                    f"helion-pallas crosscheck: {problem.kernel} [{problem.shape_key}] on {chip}: no model "
                    "results in the store: tune it first",
                    file=sys.stderr,
                )
                continue
            checks.append(_json(problem, check))
            if not ns.json:
                print(format_check(problem, check))
    finally:
        store.close()
    if ns.json:
        print(json.dumps(checks[0] if len(checks) == 1 else checks, indent=2))
    return OK if checks else NOTHING


def check_problem(problem: Problem, store: TuningStore, top: int, progress: Any = None) -> CompilerCheck | None:
    """Estimate the model's `top` picks with the TPU compiler (those not estimated yet) and compare."""
    try:
        kernel = problem.load_kernel()
    except (CompileError, KeyError):
        return None
    key = TrialKey(kernel.source_hash, problem.shape_key, problem.chip)
    picks = store.top(key.with_evaluator("model"), top)
    if not picks:
        return None
    compiler_key = key.with_evaluator("schedule")
    known = latest_by_config(store.trials(compiler_key))
    missing = [t for t in picks if Config(t.config) not in known]
    run_id = store.start_run(compiler_key, {"crosscheck": True, "path": problem.path}) if missing else None
    evaluator = ScheduleEvaluator()
    for i, trial in enumerate(missing):
        if progress is not None:
            progress(i, len(missing))
        try:
            measurement = evaluator.measure(problem.compile(trial.config))
            seconds, info = measurement.outcome()
        except CompileError as exc:
            seconds, info = None, {"error": "; ".join(d.message for d in exc.diagnostics) or "compile error"}
        store.record_trial(compiler_key, trial.config, seconds, "ok" if seconds is not None else "failed", info, run_id)
    if run_id is not None:
        store.finish_run(run_id, "done")
    if progress is not None:
        progress(len(missing), len(missing))
    return compare(picks, latest_by_config(store.trials(compiler_key)), problem.chip)


def _progress(ns: argparse.Namespace, problem: Problem) -> Any:
    if ns.progress != "jsonl":
        return None

    def emit(done: int, total: int) -> None:
        event = {"event": "progress", "phase": "crosscheck", "kernel": problem.kernel,
                 "shape_set_index": problem.shape_set, "evaluated": done, "total": total}
        write_json_line(event)

    return emit


def _json(problem: Problem, check: CompilerCheck) -> dict[str, Any]:
    return {"kernel": problem.kernel, "shape_set": {"index": problem.shape_set, "args": problem.shape_key}} | (
        check.to_json()
    )


def format_check(problem: Problem, check: CompilerCheck) -> str:
    where = f"shape set {problem.shape_set}" if problem.shape_set is not None else "--args"
    lines = [f"{problem.kernel} [{where}: {problem.shape_key}] on {check.chip} — model vs TPU compiler estimate"]
    lines.append(f"  {'#':>2} {'model':>12} {'compiler':>12}  config")
    for i, c in enumerate(check.checked, 1):
        figure = _us(c.compiler) + ("" if c.method in ("", "simulated") else f" ({c.method})")
        if c.error:
            figure = "failed"
        lines.append(f"  {i:>2} {_us(c.model):>12} {figure:>12}  {c.config}")
    lines.append(f"  {check.message()}")
    lines.append(
        f"  (µs on the device, estimates for {check.chip}: the model's without its dispatch overhead, and the "
        "TPU compiler's from libtpu's schedule)"
    )
    return "\n".join(lines)


def _us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.1f} µs"
