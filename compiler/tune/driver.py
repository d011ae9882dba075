"""One tuning run: search a kernel's config space for one shape set on one chip, check the winner, store it.

Phases:
1. search   the model scores configs (search.py: exhaustive when the space is small, else pattern search,
            bounded by evaluations or seconds, deterministic for a seed). A config that does not compile or
            does not fit VMEM is pruned before any evaluation (`KernelSpace.is_valid`), counted by reason.
2. refine   (evaluator "compile" or "tpu") the best model candidates go to the slow evaluator, which may
            reject them (libtpu) or replace the estimate by a measurement (TPU).
3. verify   candidates in rank order go through the correctness gate (correctness.py) until one passes;
            a wrong result disqualifies a config and the next one is checked.
Every trial (evaluated, pruned, failed, wrong) is recorded in the results store under its evaluator.

The driver process compiles (static analysis, no user code runs) to prune; evaluations and the gate run
on executors (worker processes or Ray), since they execute generated and user code.
"""

from __future__ import annotations

import ast
import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..api import Kernel
from ..chips import get_chip
from ..config import Config
from ..diagnostics import CompileError
from ..space import ConfigSpace
from ..vmem import fmt_bytes
from .correctness import CorrectnessResult
from .evaluators import Problem, evaluate, get_evaluator, verify
from .executors import Executor, InlineExecutor
from .keys import TrialKey
from .search import Dimension, Evaluated, SearchProgress, search
from .store import TuningStore


@dataclass(frozen=True)
class TuneOptions:
    evaluator: str = "model"
    max_evals: int | None = None  # search evaluations
    budget: float | None = None  # search seconds
    seed: int = 0
    top: int = 5  # configs listed in the result
    refine: int = 4  # candidates handed to a compile/tpu evaluator
    gate_attempts: int = 5  # candidates the correctness gate may reject before giving up
    verify: bool = True


@dataclass(frozen=True)
class TuneProgress:
    """A progress event (the CLI's progress bar and --progress jsonl, the language server)."""

    kernel: str
    shape_set_index: int | None
    phase: str  # "search" | "refine" | "verify" | "done"
    evaluated: int
    pruned: int
    total: int | None
    best_seconds: float | None
    best_config: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "event": "done" if self.phase == "done" else "progress",
            "kernel": self.kernel,
            "shape_set_index": self.shape_set_index,
            "phase": self.phase,
            "evaluated": self.evaluated,
            "pruned": self.pruned,
            "total": self.total,
            "best_seconds": self.best_seconds,
            "best_config": self.best_config,
        }


@dataclass(frozen=True)
class Candidate:
    config: dict[str, Any]
    seconds: float
    metrics: dict[str, Any]
    evaluator: str
    correctness: CorrectnessResult | None = None

    def to_json(self) -> dict[str, Any]:
        m = self.metrics
        out = {
            "config": self.config,
            "seconds": self.seconds,
            "tflops": m.get("tflops"),
            "gbps": m.get("gbps"),
            "roofline_fraction": m.get("roofline_fraction"),
            "estimate": m.get("estimate", True),
            "evaluator": self.evaluator,
        }
        if self.correctness is not None:
            out["correctness"] = self.correctness.to_json()
        return out


@dataclass
class TuneResult:
    problem: Problem
    evaluator: str
    best: Candidate | None
    top: list[Candidate]
    evaluated: int
    pruned: int
    pruned_reasons: dict[str, int]
    rejected: list[dict[str, Any]]  # candidates the refine phase or the gate disqualified, with why
    strategy: str
    stop_reason: str
    elapsed: float
    decorator: str | None
    notes: list[str] = field(default_factory=list)

    @property
    def estimate(self) -> bool:
        return get_evaluator(self.evaluator).estimated

    def to_json(self) -> dict[str, Any]:
        """The CLI's --json object (keep its keys stable: the language server and scripts read it)."""
        best = None
        if self.best is not None:
            best = self.best.to_json() | {"decorator": self.decorator}
        return {
            "kernel": self.problem.kernel,
            "shape_set": {"index": self.problem.shape_set, "args": self.problem.shape_key},
            "chip": self.problem.chip,
            "evaluator": self.evaluator,
            "estimate": self.estimate,
            "best": best,
            "evaluated": self.evaluated,
            "pruned": self.pruned,
            "pruned_reasons": self.pruned_reasons,
            "top": [c.to_json() for c in self.top],
            "rejected": self.rejected,
            "strategy": self.strategy,
            "stop_reason": self.stop_reason,
            "elapsed": self.elapsed,
            "notes": self.notes,
        }


class KernelSpace:
    """compiler.space.ConfigSpace as a search space; `is_valid` compiles (cached) and prunes what does
    not compile or does not fit VMEM."""

    def __init__(self, problem: Problem, kernel: Kernel, space: ConfigSpace, cache_size: int = 4096):
        self.problem = problem
        self.kernel = kernel
        self.space = space
        self.chip = get_chip(problem.chip)
        self.dimensions = [Dimension(name, tuple(values)) for name, values in space.dimensions]
        self._verdicts: OrderedDict[str, tuple[bool, str]] = OrderedDict()
        self._cache_size = cache_size

    def to_config(self, point: dict[str, Any]) -> Config:
        return self.space.to_config(point)

    def is_valid(self, config: Mapping[str, Any]) -> tuple[bool, str]:
        key = repr(Config(dict(config)))
        if key in self._verdicts:
            self._verdicts.move_to_end(key)
            return self._verdicts[key]
        try:
            ck = self.problem.compile(config)
        except CompileError as exc:
            codes = ", ".join(sorted({d.code for d in exc.diagnostics if d.is_error})) or "error"
            verdict = (False, f"rejected by the compiler ({codes})")
        else:
            if ck.vmem.verdict == "out_of_vmem":
                verdict = (
                    False,
                    f"out of VMEM: needs more than the {fmt_bytes(self.chip.max_vmem_limit_bytes)} "
                    f"a kernel can request on {self.chip.name}",
                )
            else:
                verdict = (True, "")
        self._verdicts[key] = verdict
        if len(self._verdicts) > self._cache_size:
            self._verdicts.popitem(last=False)
        return verdict

    def seed_points(self, configs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Starting points from known configs (default, decorator, stored best) that belong to the space."""
        points = []
        for config in configs:
            point = self.space.point_of(Config(dict(config)))
            if all(point[name] in values for name, values in self.space.dimensions) and point not in points:
                points.append(point)
        return points


def tune(
    problem: Problem,
    options: TuneOptions,
    *,
    executor: Executor | None = None,
    refine_executor: Executor | None = None,
    store: TuningStore | None = None,
    progress: Callable[[TuneProgress], None] | None = None,
    should_stop: Callable[[], bool] | threading.Event | None = None,
) -> TuneResult:
    """Tune one kernel for one shape set on one chip. Raises CompileError when the kernel cannot be
    analysed for these arguments at all, EvaluatorUnavailable when the evaluator cannot run."""
    start = time.monotonic()
    executor = executor or InlineExecutor()
    kernel = problem.load_kernel()
    space = KernelSpace(problem, kernel, kernel.config_space(problem.args, problem.chip))
    key = TrialKey(kernel.source_hash, problem.shape_key, problem.chip)
    model_key = key.with_evaluator("model")
    run_id = store.start_run(model_key, {"seed": options.seed, "path": problem.path}) if store else None

    def emit(phase: str, evaluated: int, pruned: int, total: int | None, best: Candidate | None) -> None:
        if progress is not None:
            progress(
                TuneProgress(
                    problem.kernel,
                    problem.shape_set,
                    phase,
                    evaluated,
                    pruned,
                    total,
                    None if best is None else best.seconds,
                    None if best is None else best.config,
                )
            )

    def on_progress(p: SearchProgress) -> None:
        if progress is not None:
            progress(
                TuneProgress(
                    problem.kernel,
                    problem.shape_set,
                    "search",
                    p.evaluated,
                    p.pruned,
                    p.total_estimate,
                    p.best_score,
                    None if p.best_config is None else dict(p.best_config),
                )
            )

    def on_result(r: Evaluated) -> None:
        if store is not None:
            verdict = "ok" if r.score is not None else "failed"
            store.record_trial(model_key, dict(r.config), r.score, verdict, r.info, run_id)

    def on_pruned(config: Mapping[str, Any], reason: str) -> None:
        if store is not None:
            store.record_trial(model_key, dict(config), None, "pruned", {"reason": reason}, run_id)

    seeds = [kernel.default_config(problem.args, problem.chip)]
    if kernel.decorator_config is not None:
        seeds.append(kernel.decorator_config)
    if store is not None and (stored := store.best(model_key)) is not None:
        seeds.append(stored.config)
    status = "failed"
    try:
        result = search(
            space,
            functools.partial(evaluate, problem, "model"),
            executor=executor,
            seeds=space.seed_points(seeds),
            max_evals=options.max_evals,
            max_seconds=options.budget,
            seed=options.seed,
            progress=on_progress,
            on_result=on_result,
            on_pruned=on_pruned,
            should_stop=should_stop,
        )
        ranked = sorted((r for r in result.evaluated if r.score is not None), key=lambda r: r.score)
        candidates = [Candidate(dict(r.config), r.score, dict(r.info), "model") for r in ranked]
        evaluated, pruned = len(result.evaluated), result.pruned
        rejected: list[dict[str, Any]] = []
        notes: list[str] = []
        best_so_far = candidates[0] if candidates else None
        if options.evaluator != "model" and candidates:
            emit("refine", evaluated, pruned, None, best_so_far)
            candidates = _refine(
                problem,
                options,
                candidates,
                refine_executor or executor,
                key.with_evaluator(options.evaluator),
                store,
                run_id,
                rejected,
            )
        best = None
        if options.verify:
            emit("verify", evaluated, pruned, None, candidates[0] if candidates else None)
            best, candidates = _gate(
                problem,
                options,
                candidates,
                executor,
                key.with_evaluator(options.evaluator),
                store,
                run_id,
                rejected,
            )
        elif candidates:
            best = candidates[0]
            notes.append("correctness not checked (verification was switched off)")
        if best is not None and best.correctness is not None and best.correctness.verdict == "unverified":
            notes.append(f"correctness not verified: {best.correctness.message}")
        status = "cancelled" if result.stop_reason == "cancelled" else "done"
        out = TuneResult(
            problem,
            options.evaluator,
            best,
            candidates[: options.top],
            evaluated,
            pruned,
            dict(result.pruned_reasons),
            rejected,
            result.strategy,
            result.stop_reason,
            time.monotonic() - start,
            decorator_line(kernel, best.config) if best else None,
            notes,
        )
        emit("done", evaluated, pruned, evaluated, best)
        return out
    finally:
        if store is not None and run_id is not None:
            store.finish_run(run_id, status)


def _refine(
    problem: Problem,
    options: TuneOptions,
    ranked: list[Candidate],
    executor: Executor,
    key: TrialKey,
    store: TuningStore | None,
    run_id: str | None,
    rejected: list[dict[str, Any]],
) -> list[Candidate]:
    """The slow evaluator on the model's best candidates, best first, until `options.refine` succeed."""
    kept: list[Candidate] = []
    fn = functools.partial(evaluate, problem, options.evaluator)
    pos = 0
    while len(kept) < options.refine and pos < len(ranked) and pos < 4 * options.refine:
        batch = ranked[pos : pos + max(1, min(options.refine - len(kept), executor.parallelism))]
        pos += len(batch)
        configs = [c.config for c in batch]
        outcomes = {id(config): outcome for config, outcome in executor.map_unordered(fn, configs)}
        for cand in batch:
            outcome = outcomes[id(cand.config)]
            if isinstance(outcome, BaseException):
                raise outcome
            seconds, info = outcome
            if store is not None:
                store.record_trial(
                    key, cand.config, seconds, "ok" if seconds is not None else "failed", info, run_id
                )
            if seconds is None:
                rejected.append(
                    {
                        "config": cand.config,
                        "evaluator": options.evaluator,
                        "why": info.get("error", "unusable"),
                    }
                )
            else:
                kept.append(Candidate(cand.config, seconds, info, options.evaluator))
    return sorted(kept, key=lambda c: c.seconds)


def _gate(
    problem: Problem,
    options: TuneOptions,
    ranked: list[Candidate],
    executor: Executor,
    key: TrialKey,
    store: TuningStore | None,
    run_id: str | None,
    rejected: list[dict[str, Any]],
) -> tuple[Candidate | None, list[Candidate]]:
    """Check candidates best first; the first that is not wrong is the best. Returns it and the ranking
    without the disqualified ones."""
    remaining = list(ranked)
    for cand in ranked[: options.gate_attempts]:
        # an exception here means the gate itself broke (not the config): the caller reports it
        check = executor.submit(verify, problem, cand.config, options.seed).result()
        if check.verdict in ("ok", "unverified"):
            best = Candidate(cand.config, cand.seconds, cand.metrics, cand.evaluator, check)
            return best, [best if c is cand else c for c in remaining]
        remaining.remove(cand)
        rejected.append(
            {
                "config": cand.config,
                "evaluator": "correctness",
                "why": check.message,
                "verdict": check.verdict,
                "shapes": check.shapes,
            }
        )
        if store is not None:
            store.record_trial(
                key,
                cand.config,
                None,
                "wrong" if check.verdict == "wrong" else "failed",
                {"correctness": check.to_json()} | cand.metrics,
                run_id,
            )
    return None, remaining


def decorator_line(kernel: Kernel, config: Mapping[str, Any]) -> str:
    """`@helion.kernel(<the decorator's other arguments>, config=helion.Config(...))` to paste."""
    cfg = repr(Config(dict(config)))
    text = _range_text(kernel.source, kernel.decorator_range)
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        node = None
    if isinstance(node, ast.Call):
        kept = [ast.unparse(a) for a in node.args]
        kept += [ast.unparse(kw) for kw in node.keywords if kw.arg not in ("config", "configs")]
        return f"@{ast.unparse(node.func)}({', '.join([*kept, f'config={cfg}'])})"
    func = ast.unparse(node) if node is not None else "helion.kernel"
    return f"@{func}(config={cfg})"


def _range_text(source: str, rng: Any) -> str:
    lines = source.splitlines()
    start, end = rng.start, rng.end
    if start.line == end.line:
        return lines[start.line][start.character : end.character]
    parts = [
        lines[start.line][start.character :],
        *lines[start.line + 1 : end.line],
        lines[end.line][: end.character],
    ]
    return "\n".join(parts)
