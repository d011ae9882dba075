"""One tuning run: search a kernel's config space for one shape set on one chip, check the winner, store it.

Phases:
1. search   the model scores configs by tuning's objective (objective.py: speed, with a margin against
            configs over the default scoped VMEM) (search.py: exhaustive when the space is small, else pattern search,
            bounded by evaluations or seconds, deterministic for a seed). The model is static analysis:
            it runs here, in-process, on each config's compile, which is done once per config
            (`KernelSpace`). A config that does not compile or does not fit VMEM is pruned, counted by
            reason; one whose blocks are all at least those of a config that does not fit VMEM is pruned
            without compiling (VMEM only grows with block sizes).
2. refine   (evaluator "compile", "schedule" or "tpu") the best model candidates go to the slow evaluator,
            which may reject them (libtpu) or replace the estimate by its own (the TPU compiler's) or by a
            measurement (TPU; the kernel's default config is measured too) (refine.py).
3. verify   the winner goes through the correctness gate (correctness.py); when it is wrong, the runner-up
            (`gate_attempts` in all; a config the TPU compiler rejects for want of VMEM counts apart, and
            passes over the candidates its shortfall says cannot fit either). A verdict already known
            (verdicts.py) is not checked again. With the model evaluator and a gate worker, a best config
            that has stood for `EARLY_AFTER` evaluations is sent to the gate while the search goes on (a
            search usually finds its winner halfway and spends the rest confirming it): when it is the winner,
            its check has run meanwhile; when it is not, the winner is checked as usual, and the early check
            is dropped (a libtpu compile of it still running is stopped: correctness.drop_ask). Either way
            the winner is reported only with its own verdict.
Every trial (evaluated, pruned, failed, wrong) is recorded in the results store under its evaluator.

(Past 500 lines on purpose: a run's phases share its state — candidates, the store's run, the gate's pending
checks — and read best together.)

No user code runs in the driver process: the search only compiles and models, and the gate's compile for
reduced shapes happens here too. Running the gate's check, and the compile and tpu evaluators, happens on
executors (worker processes or Ray), since they execute generated and user code.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field, replace
from typing import Any

from ..ir.chips import get_chip
from ..ir.config import Config
from . import collector, searches
from .correctness import CorrectnessResult, ask_tpu_compiler, combine, drop_ask
from .decorator import decorator_line
from .evaluators import Problem, gate_case, get_evaluator, verify
from .executors import Executor, InlineExecutor
from .kernel_space import KernelSpace
from .keys import TrialKey
from .objective import objective, resolution, worth_applying
from .refine import Candidate, refine
from .search import Evaluated, SearchProgress, search
from .store import TuningStore
from .verdicts import Verdicts

# evaluations a best config must stand before its check starts during the search: an early check of a config that
# does not win wastes its libtpu compile (~6 CPU-s for attention 32k's [1, 256, 2048], which stood 121 to 319). At
# 200, no early check of the examples on v7x lost and each winner was still sent before its search ended.
EARLY_AFTER = 200


@dataclass(frozen=True)
class TuneOptions:
    evaluator: str = "model"
    max_evals: int | None = None  # at most this many search evaluations
    budget: float | None = None  # at most this many search seconds
    seed: int = 0
    top: int = 5  # configs listed in the result
    refine: int = 4  # candidates handed to a compile/tpu evaluator
    gate_attempts: int = 2  # candidates the correctness gate checks: the winner, then the runner-up
    verify: bool = True
    restarts: int = 8  # pattern-search restarts once searchers converge; then the search ends, budget or not


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


# candidates the gate lets the TPU compiler reject for want of VMEM (beside gate_attempts' wrong or failed ones)
VMEM_REJECTIONS = 3


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
    elapsed: float  # seconds of this run's own work: search, refine and the gate's checks
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


def tune(
    problem: Problem,
    options: TuneOptions,
    *,
    executor: Executor | None = None,
    refine_executor: Executor | None = None,
    store: TuningStore | None = None,
    progress: Callable[[TuneProgress], None] | None = None,
    should_stop: Callable[[], bool] | threading.Event | None = None,
    verdicts: Verdicts | None = None,
) -> TuneResult:
    """Tune one kernel for one shape set on one chip. Raises CompileError when the kernel cannot be
    analysed for these arguments at all, EvaluatorUnavailable when the evaluator cannot run."""
    run = TuneRun(
        problem,
        options,
        executor=executor,
        refine_executor=refine_executor,
        store=store,
        progress=progress,
        should_stop=should_stop,
        verdicts=verdicts,
    )
    run.start_gate()
    return run.finish()


@dataclass(frozen=True)
class Searched:
    """What the search (and refine) phase of a run found: picklable, so another process may search."""

    result: Any  # search.SearchResult
    candidates: list[Candidate]
    run_id: str | None
    work_seconds: float
    rejected: list[dict[str, Any]]
    gate: Any = None  # the winner's gate case (GateCase or the verdict of one that does not compile), if prepared
    notes: tuple[str, ...] = ()  # what the search phase has to say (the current config kept)


class TuneRun:
    """One tuning run in two steps, so that whoever tunes several shape sets can search the next one while
    a worker checks this one's winner: constructing it searches (and refines); `start_gate()` sends the
    winner to the correctness gate without waiting; `finish()` waits for the verdict (checking the
    runner-up when the winner is wrong), records it and returns the TuneResult. Constructing raises what
    `tune` raises. Given `searched` (another process's `searched()`), it does not search again."""

    def __init__(
        self,
        problem: Problem,
        options: TuneOptions,
        *,
        executor: Executor | None = None,
        refine_executor: Executor | None = None,
        store: TuningStore | None = None,
        progress: Callable[[TuneProgress], None] | None = None,
        should_stop: Callable[[], bool] | threading.Event | None = None,
        verdicts: Verdicts | None = None,
        searched: Searched | None = None,
        early_sink: Callable[[dict[str, Any], Any], None] | None = None,
        early: tuple[dict[str, Any], Future[CorrectnessResult]] | None = None,
    ):
        self.start = time.monotonic()
        self.problem, self.options, self.store, self.progress = problem, options, store, progress
        self.verdicts = verdicts
        self.executor = executor or InlineExecutor()
        self.kernel = kernel = problem.load_kernel()
        self.key = TrialKey(kernel.source_hash, problem.shape_key, problem.chip)
        self.notes: list[str] = []
        self._pending: Future[CorrectnessResult] | None = None
        self._gate_case: Any = None  # the winner's, when prepare_gate() made it
        # a check started mid-search (here, or by the caller from what `early_sink` was given elsewhere)
        self._early: tuple[dict[str, Any], Future[CorrectnessResult]] | None = early
        self._early_sink = early_sink
        self._early_sent: tuple[dict[str, Any], Any] | None = None  # (config, its case) handed to early_sink
        self._done = False
        problem.require_hbm()
        if searched is not None:
            self.result, self.candidates, self.run_id = searched.result, searched.candidates, searched.run_id
            self.work_seconds, self.rejected = searched.work_seconds, searched.rejected
            self.evaluated, self.pruned = len(self.result.evaluated), self.result.pruned
            self._gate_case = searched.gate
            self.notes += searched.notes
            return
        self.space = space = KernelSpace(problem, kernel, kernel.config_space(problem.args, problem.chip))
        model_key = self.key.with_evaluator("model")
        self.run_id = store.start_run(model_key, {"seed": options.seed, "path": problem.path}) if store else None
        self.rejected: list[dict[str, Any]] = []
        trials: list[tuple[dict[str, Any], float | None, str, dict[str, Any]]] = []

        early = options.verify and options.evaluator == "model" and (
            early_sink is not None or not isinstance(self.executor, InlineExecutor))
        # the best config so far, its objective, and the evaluations counted when it became best: followed at
        # every result (progress comes at most every 0.25 s, which let a winner stand unnoticed to the end)
        standing: list[Any] = [None, float("inf"), 0]
        evaluations = [0]

        def on_progress(p: SearchProgress) -> None:
            best = None if p.best_config is None else dict(p.best_config)
            seconds = (p.best_info or {}).get("seconds", p.best_score)  # the estimate, not the objective
            self._emit("search", p.evaluated, p.pruned, p.total_estimate, seconds, best)

        def on_result(r: Evaluated) -> None:  # the score is the objective; the trial keeps the seconds
            seconds = r.info.get("seconds", r.score) if r.score is not None else None
            trials.append((dict(r.config), seconds, "ok" if seconds is not None else "failed", r.info))
            evaluations[0] += 1
            if r.score is not None and r.score < standing[1]:  # strictly better: the first of equals stays best
                standing[:] = [dict(r.config), r.score, evaluations[0]]
            elif early and standing[0] is not None and evaluations[0] - standing[2] >= EARLY_AFTER:
                self._check_early(standing[0])

        def on_pruned(config: Mapping[str, Any], reason: str) -> None:
            trials.append((dict(config), None, "pruned", {"reason": reason}))

        seeds = [kernel.default_config(problem.args, problem.chip)]
        if kernel.decorator_config is not None:
            seeds.append(kernel.decorator_config)
        if store is not None and (stored := store.best(model_key)) is not None:
            seeds.append(stored.config)
        # a deterministic search (the model, no time budget) that ran before is taken as it was (searches.py)
        parts = None
        if verdicts is not None and options.evaluator == "model" and options.budget is None:
            parts = searches.search_parts(problem.source, problem.kernel, problem.shape_key, problem.chip, seeds,
                                          {"seed": options.seed, "max_evals": options.max_evals,
                                           "restarts": options.restarts,
                                           "kernel": kernel.source_hash})  # what the front end read beyond the file
        recalled = searches.recall(verdicts.cache, parts) if parts is not None else None
        try:
            try:
                if recalled is not None:
                    self.result, trials[:] = recalled
                    self.notes.append(f"search remembered from an earlier run ({len(self.result.evaluated)} configs "
                                      "evaluated by the model)")
                else:
                    with collector.paused():  # (collector.py)
                        self.result = search(
                            space,
                            space.evaluate,
                            executor=InlineExecutor(),
                            seeds=space.seed_points(seeds),
                            max_evals=options.max_evals,
                            max_seconds=options.budget,
                            max_restarts=options.restarts,
                            seed=options.seed,
                            progress=on_progress,
                            on_result=on_result,
                            on_pruned=on_pruned,
                            should_stop=should_stop,
                        )
                    if parts is not None and not _stopped(should_stop):
                        searches.keep(verdicts.cache, parts, self.result, trials)
            finally:
                if store is not None:
                    store.record_trials(model_key, trials, self.run_id)
            ranked = sorted((r for r in self.result.evaluated if r.score is not None), key=lambda r: r.score)
            self.candidates = [
                Candidate(dict(r.config), r.info.get("seconds", r.score), dict(r.info), "model") for r in ranked
            ]
            self.evaluated, self.pruned = len(self.result.evaluated), self.result.pruned
            if options.evaluator != "model" and self.candidates:
                self._emit_best("refine", self.candidates[0])
                self.candidates = refine(
                    problem,
                    options.evaluator,
                    options.refine,
                    self.candidates,
                    refine_executor or self.executor,
                    self.key.with_evaluator(options.evaluator),
                    store,
                    self.run_id,
                    self.rejected,
                    None if options.budget is None else self.start + options.budget,
                )
            self.candidates = self._current_first(self.candidates)
        except BaseException:
            self._finish_run("failed")
            raise
        self.work_seconds = time.monotonic() - self.start  # the gate's checks are added as they arrive

    def searched(self) -> Searched:
        return Searched(self.result, self.candidates, self.run_id, self.work_seconds, self.rejected, self._gate_case,
                        tuple(self.notes))

    def _current_first(self, candidates: list[Candidate]) -> list[Candidate]:
        """The config the kernel runs with now (its decorator's for the shape set, else its default) first, when the
        best is an estimate that promises less than the model's resolution on the chip over it
        (objective.resolution): the model does not order configs that close. Said in a note."""
        if len(candidates) < 2:
            return candidates
        space = self.space.space
        now = self.kernel.config_for(self.problem.shape_set) or self.kernel.default_config(self.problem.args,
                                                                                         self.problem.chip)
        current = space.to_config(space.point_of(Config(dict(now))))
        at = next((i for i, c in enumerate(candidates) if Config(c.config) == current), None)
        if not at:  # not scored (outside the space, or failed), or the best already
            return candidates
        best, kept = candidates[0], candidates[at]
        ahead, now_at = objective(best.seconds, best.metrics), objective(kept.seconds, kept.metrics)
        least = resolution(best.metrics, kept.metrics)
        if not least or worth_applying(ahead, now_at, least):
            return candidates
        self.notes.append(
            f"kept the current config {Config(kept.config).short()}: the model's best, {Config(best.config).short()}, "
            f"is {now_at / ahead - 1:.1%} faster by tuning's objective, under the model's {least:.0%} resolution "
            f"on {self.problem.chip} (compiler/tune/objective.py)")
        return [kept, *candidates[:at], *candidates[at + 1 :]]

    def prepare_gate(self) -> None:
        """Compile the winner for the gate's reduced shapes now (the first half of its check: static work), so
        that a process that searched elsewhere hands it over ready and the gate starts at once."""
        if self.options.verify and self.candidates and self._gate_case is None:
            winner = self.candidates[0].config
            sent = self._early_sent
            self._gate_case = sent[1] if sent is not None and sent[0] == winner else gate_case(self.problem, winner)

    def _emit(
        self,
        phase: str,
        evaluated: int | None = None,
        pruned: int | None = None,
        total: int | None = None,
        best_seconds: float | None = None,
        best_config: dict[str, Any] | None = None,
    ) -> None:
        if self.progress is None:
            return
        self.progress(
            TuneProgress(
                self.problem.kernel,
                self.problem.shape_set,
                phase,
                self.evaluated if evaluated is None else evaluated,
                self.pruned if pruned is None else pruned,
                total,
                best_seconds,
                best_config,
            )
        )

    def _emit_best(self, phase: str, best: Candidate | None, total: int | None = None) -> None:
        seconds, config = (None, None) if best is None else (best.seconds, best.config)
        self._emit(phase, None, None, total, seconds, config)

    def _check_early(self, config: dict[str, Any]) -> None:
        """Start the gate's check of the search's standing best (once per run) while the search goes on; a
        search without the gate's executor (forked, parallel.py) hands the compiled case to `early_sink`."""
        if self._early is not None or self._early_sent is not None:
            return
        if self._early_sink is not None:
            self._early_sent = (config, gate_case(self.problem, config))
            self._early_sink(*self._early_sent)
        else:
            self._early = (config, self._submit_check(config))

    def start_gate(self) -> None:
        """Send the winner to the correctness gate (on the executor) and return at once; a check of it that
        started during the search is the one waited for."""
        if self.options.verify and self.candidates and self._pending is None:
            self._emit_best("verify", self.candidates[0])
            if self._early is not None and self._early[0] == self.candidates[0].config:
                self._pending = self._early[1]
            else:
                if self._early is not None:
                    self._early[1].cancel()  # not the winner: dropped unless the worker has started it
                self._pending = self._submit_check(self.candidates[0].config)

    def _submit_check(self, config: Mapping[str, Any]) -> Future[CorrectnessResult]:
        """Compile `config` for the gate's reduced shapes here, run the check on the executor (unless its
        verdict is remembered)."""
        prepared = self._gate_case is not None and self.candidates and config == self.candidates[0].config
        case = self._gate_case if prepared else gate_case(self.problem, config)
        return submit_check(self.executor, case, self.options.seed, self.verdicts)

    def finish(self) -> TuneResult:
        """Wait for the gate's verdicts and return the result (once)."""
        if self._done:
            raise RuntimeError("TuneRun.finish() was already called")
        self._done = True
        try:
            candidates = self.candidates
            best = None
            if self.options.verify:
                self.start_gate()
                best, candidates = self._gate()
            elif candidates:
                best = candidates[0]
                self.notes.append("correctness not checked (verification was switched off)")
            if best is not None and best.correctness is not None and best.correctness.verdict == "unverified":
                self.notes.append(f"correctness not verified: {best.correctness.message}")
        except BaseException:
            self._finish_run("failed")
            raise
        self._finish_run("cancelled" if self.result.stop_reason == "cancelled" else "done")
        out = TuneResult(
            self.problem,
            self.options.evaluator,
            best,
            candidates[: self.options.top],
            self.evaluated,
            self.pruned,
            dict(self.result.pruned_reasons),
            self.rejected,
            self.result.strategy,
            self.result.stop_reason,
            self.work_seconds,
            decorator_line(self.kernel, best.config) if best else None,
            self.notes,
        )
        self._emit_best("done", best, self.evaluated)
        return out

    def _finish_run(self, status: str) -> None:
        if self.store is not None and self.run_id is not None:
            self.store.finish_run(self.run_id, status)
            self.run_id = None

    def _gate(self) -> tuple[Candidate | None, list[Candidate]]:
        """Check candidates best first; the first that is not wrong is the best. Returns it and the ranking
        without the disqualified ones.

        A wrong or failed check counts against `gate_attempts`. One the TPU compiler rejects for want of VMEM
        counts against `VMEM_REJECTIONS` instead, and says how far the VMEM report falls short for this kernel
        (its need over the report's total): a later candidate whose total, scaled by that, is over the chip's
        limit is passed over unchecked. The best configs of a kernel tend to share their blocks, and so the
        report's shortfall (attention 8k on v5e: the first six all have 4096-query blocks), and each libtpu
        compile at the real shapes takes up to a minute."""
        key = self.key.with_evaluator(self.options.evaluator)
        remaining = list(self.candidates)
        attempts = vmem_rejections = 0
        shortfall, because = 1.0, ""
        limit = get_chip(self.problem.chip).max_vmem_limit_bytes
        for i, cand in enumerate(self.candidates):
            if attempts >= self.options.gate_attempts or vmem_rejections >= VMEM_REJECTIONS:
                break
            if _cannot_fit(cand, shortfall, limit):
                continue  # left out of the ranking at the end (_passed_over)
            # an exception here means the gate itself broke (not the config): the caller reports it
            if i == 0 and self._pending is not None:
                check = self._pending.result()
            else:
                check = self._submit_check(cand.config).result()
            self.work_seconds += check.seconds
            if check.verdict in ("ok", "unverified"):
                best = Candidate(cand.config, cand.seconds, cand.metrics, cand.evaluator, check)
                if self.verdicts is not None and check.verdict == "ok":
                    self.verdicts.keep_winner(self.key.source_hash, self.key.shape_key, self.key.chip,
                                              self.options.evaluator, cand.config)
                ranking = self._passed_over([best if c is cand else c for c in remaining], shortfall, because, limit)
                return best, ranking
            if check.vmem_needed_bytes and check.vmem_estimated_bytes:
                vmem_rejections += 1
                if check.vmem_needed_bytes / check.vmem_estimated_bytes > shortfall:
                    shortfall = check.vmem_needed_bytes / check.vmem_estimated_bytes
                    because = (f"the TPU compiler needed {shortfall:.2f}x the VMEM report's total for "
                               f"{Config(cand.config).short()}")
            else:
                attempts += 1
            remaining.remove(cand)
            self.rejected.append(
                {
                    "config": cand.config,
                    "evaluator": "correctness",
                    "why": check.message,
                    "verdict": check.verdict,
                    "shapes": check.shapes,
                }
            )
            if self.store is not None:
                self.store.record_trial(
                    key,
                    cand.config,
                    None,
                    "wrong" if check.verdict == "wrong" else "failed",
                    {"correctness": check.to_json()} | cand.metrics,
                    self.run_id,
                )
        return None, self._passed_over(remaining, shortfall, because, limit)

    def _passed_over(self, ranking: list[Candidate], shortfall: float, because: str, limit: int) -> list[Candidate]:
        """The ranking without the configs the report's shortfall puts over the chip's limit (those the gate
        passed over and those below its winner), and a note saying how many and why."""
        kept = [c for c in ranking if c.correctness is not None or not _cannot_fit(c, shortfall, limit)]
        count = len(ranking) - len(kept)
        if count:
            self.notes.append(f"{count} config{'s' if count > 1 else ''} left out unchecked: {because}, and at "
                              f"that rate {'they' if count > 1 else 'it'} would need more than the "
                              f"{limit / 2**20:.0f} MiB {self.problem.chip} allows")
        return kept


def _both(compared: Future[CorrectnessResult], asking: Future[CorrectnessResult]) -> Future[CorrectnessResult]:
    """The check's result once the reduced run and the TPU compiler have both answered (correctness.combine); an
    exception of either is the check's. Cancelling it cancels the reduced run if it has not started, and drops
    the TPU compiler's ask (stopping its compile if it has started: correctness.drop_ask)."""
    out: Future[CorrectnessResult] = Future()

    def done(_: Future[CorrectnessResult]) -> None:
        if not (compared.done() and asking.done()) or out.done():
            return
        with contextlib.suppress(InvalidStateError):  # cancelled meanwhile
            try:
                result = combine(compared.result(), asking.result())
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the check
                out.set_exception(exc)
                return
            out.set_result(result)

    def cancel(f: Future[CorrectnessResult]) -> None:
        if f.cancelled():
            compared.cancel()
            drop_ask(asking)

    out.add_done_callback(cancel)
    compared.add_done_callback(done)
    asking.add_done_callback(done)
    return out


def _stopped(should_stop: Callable[[], bool] | threading.Event | None) -> bool:
    """Whether the caller asked the search to stop (it may have ended early: not a search to remember)."""
    if should_stop is None:
        return False
    return should_stop.is_set() if isinstance(should_stop, threading.Event) else bool(should_stop())


def _cannot_fit(cand: Candidate, shortfall: float, limit: int) -> bool:
    """The candidate's VMEM report total, scaled by the report's shortfall the TPU compiler showed for this
    kernel, is over the chip's limit."""
    return shortfall > 1 and cand.metrics.get("vmem_bytes", 0) * shortfall > limit


def submit_check(executor: Executor, case: Any, seed: int, verdicts: Verdicts | None) -> Future[CorrectnessResult]:
    """The gate's check of a compiled case (a GateCase, or the verdict of a config that does not compile for
    the reduced shapes) on the executor, unless its verdict is remembered; a new verdict is remembered."""
    known = case if isinstance(case, CorrectnessResult) else (
        verdicts.recall(case, seed) if verdicts is not None else None)
    if known is not None:
        done: Future[CorrectnessResult] = Future()
        done.set_result(known)
        return done
    if case.real is not None:  # the TPU compiler asked here, beside the reduced run on the executor
        asking = ask_tpu_compiler(case)
        compared = executor.submit(verify, replace(case, real=None), seed)
        future = _both(compared, asking)
    else:
        future = executor.submit(verify, case, seed)
    if verdicts is not None:  # a cancelled check (an early candidate that lost) has no verdict to keep
        future.add_done_callback(lambda f: f.cancelled() or f.exception() or verdicts.keep(case, seed, f.result()))
    return future
