"""Search strategies over a finite config space: exhaustive enumeration, or pattern search with restarts.

(Slightly over 500 lines on purpose: both strategies share the budget, batching, pruning and progress
bookkeeping, and read best side by side.)

The space protocol (`SearchSpace`) — all a strategy knows about kernels:

    space.dimensions                 a sequence of dimensions; each has `.name` (str) and `.values` (a finite,
                                     non-empty sequence of candidates, ordered so that neighbours are similar,
                                     e.g. ascending block sizes) and may have `.ordered` (bool): whether
                                     neighbouring values are related. Without it, a dimension whose values are
                                     all numbers is ordered and any other is categorical.
    space.to_config(point)           point = {dimension name: chosen value, ...} (every dimension, in order)
                                     -> the config to evaluate (a Mapping, e.g. compiler.Config); it depends
                                     on the point alone: the search builds each point's config once
    space.is_valid(config)           -> (True, "") or (False, reason); invalid configs are pruned: counted per
                                     reason, never evaluated. Must be cheap (it runs in the searching process).

`Dimension` and `DiscreteSpace` build such a space from plain values and callables.

The objective `evaluate(config)` runs on an `Executor` (so it must be picklable: a top-level function or a
`functools.partial` of one) and returns a score, lower is better (seconds), or None when the config is
unusable, optionally with an info dict: `score | None | (score | None, info)`. An exception it raises makes
the config's score None with info {"error": ...}. Distinct points that map to the same config are evaluated
once.

Strategies: "exhaustive" evaluates every valid config (seeds first); "pattern" starts from the seeds plus random
valid points, moves each of a few searchers to its best neighbour (one dimension one step; when that fails, two
dimensions at once) until none improves, and then restarts converged searchers from perturbations of the best
point or from random points. "auto" is exhaustive when the space has at most `exhaustive_threshold` points
(or no more points than max_evals), pattern otherwise.

Results are deterministic for a given `seed` and a deterministic objective: batches are formed and their
results applied in a fixed order whatever order the executor finishes them in. A time budget or cancellation
can of course cut a run at a different point.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .executors import Executor, InlineExecutor

log = logging.getLogger(__name__)

Point = tuple[int, ...]  # one index into each dimension's values
Strategy = Literal["auto", "exhaustive", "pattern"]


class DimensionLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def values(self) -> Sequence[Any]: ...


class SearchSpace(Protocol):
    @property
    def dimensions(self) -> Sequence[DimensionLike]: ...

    def to_config(self, point: dict[str, Any]) -> Mapping[str, Any]: ...

    def is_valid(self, config: Mapping[str, Any]) -> tuple[bool, str]: ...


@dataclass(frozen=True)
class Dimension:
    name: str
    values: tuple[Any, ...]
    ordered: bool | None = None  # None: ordered when every value is a number


def _always_valid(config: Mapping[str, Any]) -> tuple[bool, str]:
    return True, ""


@dataclass(frozen=True)
class DiscreteSpace:
    """A SearchSpace from dimensions and two callables (by default the point itself is the config)."""

    dimensions: Sequence[DimensionLike]
    to_config: Callable[[dict[str, Any]], Mapping[str, Any]] = dict
    is_valid: Callable[[Mapping[str, Any]], tuple[bool, str]] = _always_valid


@dataclass(frozen=True)
class Evaluated:
    config: Mapping[str, Any]
    point: dict[str, Any]
    score: float | None  # None: failed or unusable (see info)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SearchProgress:
    evaluated: int
    pruned: int
    total_estimate: int | None  # at most this many evaluations: max_evals, else every config of the space
    # (a pattern search usually converges sooner); known from the first report
    best_config: Mapping[str, Any] | None
    best_score: float | None
    best_info: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class SearchResult:
    evaluated: list[Evaluated]  # in the (deterministic) order results were applied
    best: Evaluated | None
    pruned: int
    pruned_reasons: Counter[str]
    elapsed: float
    strategy: str  # "exhaustive" | "pattern"
    stop_reason: str  # "complete" | "converged" | "max_evals" | "time" | "cancelled"


DEFAULT_EXHAUSTIVE_THRESHOLD = 256


def config_key(config: Mapping[str, Any]) -> str:
    """Canonical text of a config, for de-duplication."""
    return json.dumps(dict(config), sort_keys=True, default=str)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_ordered(dim: DimensionLike) -> bool:
    """Are neighbouring values of `dim` related: its `ordered` when it says, else whether every value is a number."""
    given = getattr(dim, "ordered", None)
    return given if given is not None else all(_is_number(v) for v in dim.values)


def neighbour_indices(dim: DimensionLike, ordered: bool, i: int) -> list[int]:
    """The indices one step from value i of `dim`: the next value down and up of an ordered dimension, every other
    value of another."""
    if ordered:
        return [j for j in (i - 1, i + 1) if 0 <= j < len(dim.values)]
    return [j for j in range(len(dim.values)) if j != i]


def _score(outcome: Any) -> tuple[float | None, dict[str, Any]]:
    if isinstance(outcome, BaseException):
        return None, {"error": f"{type(outcome).__name__}: {outcome}"}
    info: dict[str, Any] = {}
    if isinstance(outcome, tuple):
        outcome, info = outcome[0], dict(outcome[1])
    if outcome is None:
        return None, info
    score = float(outcome)
    if not math.isfinite(score):
        return None, {**info, "error": f"non-finite score {score}"}
    return score, info


class _Search:
    """State of one run; `search()` below is the entry point."""

    def __init__(
        self,
        space: SearchSpace,
        evaluate: Callable[[Any], Any],
        executor: Executor,
        *,
        max_evals: int | None,
        max_seconds: float | None,
        seed: int,
        progress: Callable[[SearchProgress], None] | None,
        progress_interval: float,
        on_result: Callable[[Evaluated], None] | None,
        on_pruned: Callable[[Mapping[str, Any], str], None] | None,
        should_stop: Callable[[], bool] | threading.Event | None,
    ):
        self.space = space
        self.dims = list(space.dimensions)
        for dim in self.dims:
            if len(dim.values) == 0:
                raise ValueError(f"dimension {dim.name!r} has no values")
        self.ordered = [is_ordered(d) for d in self.dims]
        self.size = math.prod(len(d.values) for d in self.dims)
        self.evaluate = evaluate
        self.executor = executor
        self.max_evals = max_evals
        self.start = time.monotonic()
        self.deadline = None if max_seconds is None else self.start + max_seconds
        self.rng = random.Random(seed)
        self.progress = progress
        self.progress_interval = progress_interval
        self.last_progress = -math.inf
        self.on_result = on_result
        self.on_pruned = on_pruned
        self.should_stop = should_stop.is_set if isinstance(should_stop, threading.Event) else should_stop
        self.total_estimate: int | None = None
        self.results: dict[str, Evaluated] = {}  # config key -> result, in application order
        self.points: dict[str, Point] = {}  # config key -> the first point that produced it
        self._configs: dict[Point, tuple[str, Mapping[str, Any] | None, str]] = {}  # point -> _built(point)
        self.pruned_keys: set[str] = set()
        self.pruned_reasons: Counter[str] = Counter()
        self.best: Evaluated | None = None
        self.stop_reason: str | None = None

    # ---- points and configs -----------------------------------------------------------------------------

    def values_of(self, point: Point) -> dict[str, Any]:
        return {d.name: d.values[i] for d, i in zip(self.dims, point, strict=True)}

    def point_of(self, values: Mapping[str, Any]) -> Point:
        """A seed ({name: value}) as indices; a number not among the values snaps to the nearest one."""
        point = []
        for d, ordered in zip(self.dims, self.ordered, strict=True):
            if d.name not in values:
                raise ValueError(f"seed has no value for dimension {d.name!r}")
            value = values[d.name]
            if value in list(d.values):
                point.append(list(d.values).index(value))
            elif ordered and _is_number(value):
                point.append(min(range(len(d.values)), key=lambda i: abs(d.values[i] - value)))
            else:
                raise ValueError(f"seed value {value!r} is not a candidate of dimension {d.name!r}")
        return tuple(point)

    def random_point(self) -> Point:
        return tuple(self.rng.randrange(len(d.values)) for d in self.dims)

    def config(self, point: Point) -> tuple[str, Mapping[str, Any] | None]:
        """(key, config) of a valid config; (key, None) once pruned (recorded on first sight)."""
        key, config, reason = self._built(point)
        if config is not None:
            if key in self.results or key in self.pruned_keys:
                return key, None if key in self.pruned_keys else config
            try:
                ok, reason = self.space.is_valid(config)
            except Exception as exc:  # noqa: BLE001 - same: the config is unusable, the search goes on
                ok, reason = False, f"is_valid failed: {type(exc).__name__}: {exc}"
            if ok:
                return key, config
        if key not in self.pruned_keys:
            self.pruned_keys.add(key)
            self.pruned_reasons[reason] += 1
            if self.on_pruned is not None and config is not None:
                self.on_pruned(config, reason)
        return key, None

    def _built(self, point: Point) -> tuple[str, Mapping[str, Any] | None, str]:
        """(key, config, "") of a point, or (key, None, why) when the space cannot build it; built once per
        point (a pattern search comes back to the same points many times, and `to_config` depends on the
        point alone)."""
        point = tuple(point)
        built = self._configs.get(point)
        if built is None:
            try:
                config = self.space.to_config(self.values_of(point))
                built = (config_key(config), config, "")
            except Exception as exc:  # noqa: BLE001 - a space that cannot build this point prunes it
                built = (f"point:{point}", None, f"to_config failed: {type(exc).__name__}: {exc}")
            self._configs[point] = built
        return built

    # ---- budget, progress ---------------------------------------------------------------------------------

    def stopped(self) -> bool:
        if self.stop_reason is None:
            if self.should_stop is not None and self.should_stop():
                self.stop_reason = "cancelled"
            elif self.deadline is not None and time.monotonic() >= self.deadline:
                self.stop_reason = "time"
            elif self.max_evals is not None and len(self.results) >= self.max_evals:
                self.stop_reason = "max_evals"
        return self.stop_reason is not None

    def report(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.progress is None or (not force and now - self.last_progress < self.progress_interval):
            return
        self.last_progress = now
        best = self.best
        self.progress(
            SearchProgress(
                evaluated=len(self.results),
                pruned=len(self.pruned_keys),
                total_estimate=self.total_estimate,
                best_config=None if best is None else best.config,
                best_score=None if best is None else best.score,
                best_info=None if best is None else best.info,
            )
        )

    # ---- evaluation -----------------------------------------------------------------------------------------

    def run_batch(self, points: Iterable[Point]) -> list[Evaluated | None]:
        """Scores of points (None: pruned, failed or not reached); evaluates those not seen before."""
        keyed: list[tuple[Point, str, Mapping[str, Any] | None]] = []
        todo: dict[str, tuple[Point, Mapping[str, Any]]] = {}
        for point in points:
            key, config = self.config(point)
            keyed.append((point, key, config))
            if config is not None and key not in self.results and key not in todo:
                todo[key] = (point, config)
        if self.max_evals is not None:
            todo = dict(itertools.islice(todo.items(), max(0, self.max_evals - len(self.results))))
        arrived: dict[str, Evaluated] = {}
        settled = self.best  # best of earlier batches; this batch's results all come after it
        if todo and not self.stopped():
            outcomes = self.executor.map_unordered(self.evaluate, [config for _, config in todo.values()])
            try:
                for config, outcome in outcomes:
                    key = config_key(config)
                    score, info = _score(outcome)
                    point = todo[key][0]
                    done = Evaluated(config, self.values_of(point), score, info)
                    self.points[key] = point
                    arrived[key] = done
                    if self.on_result is not None:
                        self.on_result(done)
                    if score is not None and (self.best is None or score < self.best.score):
                        self.best = done  # provisional, for progress; settled below in batch order
                    self.results[key] = done
                    self.report()
                    if self.stopped():
                        break
            finally:
                outcomes.close()
        # Apply in batch order so that ties and the result list do not depend on completion order.
        batch = [arrived[key] for key in todo if key in arrived]
        for done in batch:
            key = config_key(done.config)
            self.results.pop(key)
            self.results[key] = done
        candidates = [r for r in [settled, *batch] if r is not None and r.score is not None]
        self.best = min(candidates, key=lambda r: r.score, default=None)  # the first of equals wins
        self.report()
        return [self.results.get(key) if config is not None else None for _, key, config in keyed]

    # ---- strategies -----------------------------------------------------------------------------------------

    def exhaustive(self, seeds: list[Point]) -> None:
        order: dict[str, Point] = {}
        for point in itertools.chain(seeds, itertools.product(*(range(len(d.values)) for d in self.dims))):
            if self.stopped():
                return
            key, config = self.config(point)
            if config is not None:
                order.setdefault(key, point)
        points = list(order.values())
        self.total_estimate = len(points) if self.max_evals is None else min(len(points), self.max_evals)
        self.report(force=True)
        batch = max(8, 4 * self.executor.parallelism)
        for i in range(0, len(points), batch):
            if self.stopped():
                return
            self.run_batch(points[i : i + batch])
        self.stop_reason = self.stop_reason or "complete"

    def sample_new(self, tries: int = 200) -> Point | None:
        """A random valid point whose config has not been seen, or None when none turns up."""
        for _ in range(tries):
            point = self.random_point()
            key, config = self.config(point)
            if config is not None and key not in self.results:
                return point
        return None

    def perturb_best(self, tries: int = 50) -> Point | None:
        """The best point with a few dimensions changed at random (exploits structure near the optimum)."""
        if self.best is None:
            return self.sample_new()
        base = self.points[config_key(self.best.config)]
        for _ in range(tries):
            point = list(base)
            for d in self.rng.sample(range(len(self.dims)), self.rng.randint(1, max(1, len(self.dims) // 2))):
                point[d] = self.rng.randrange(len(self.dims[d].values))
            key, config = self.config(tuple(point))
            if config is not None and key not in self.results:
                return tuple(point)
        return self.sample_new()

    def moves(self, d: int, i: int) -> list[int]:
        return neighbour_indices(self.dims[d], self.ordered[d], i)

    def neighbours(self, point: Point, pairs: bool) -> list[Point]:
        out = []
        if not pairs:
            for d in range(len(point)):
                for j in self.moves(d, point[d]):
                    out.append(point[:d] + (j,) + point[d + 1 :])
            return out
        for d1, d2 in itertools.combinations(range(len(point)), 2):
            for j1 in self.moves(d1, point[d1]):
                for j2 in self.moves(d2, point[d2]):
                    p = list(point)
                    p[d1], p[d2] = j1, j2
                    out.append(tuple(p))
        return out

    def pattern(
        self, seeds: list[Point], searchers: int, initial_samples: int, max_restarts: int | None
    ) -> None:
        self.total_estimate = self.size if self.max_evals is None else min(self.max_evals, self.size)
        self.report(force=True)
        starts = list(seeds)
        while len(starts) < max(initial_samples, len(seeds)):
            point = self.sample_new()
            if point is None:
                break
            starts.append(point)
        ranked = sorted(
            (r for r in self.run_batch(starts) if r is not None and r.score is not None),
            key=lambda r: r.score,
        )
        # each searcher: [point, score, poll pairs next?]
        active: list[list[Any]] = []
        for r in ranked:
            point = self.points[config_key(r.config)]
            if len(active) < searchers and all(a[0] != point for a in active):
                active.append([point, r.score, False])
        restarts = 0
        while not self.stopped():
            want = searchers - len(active)
            fresh: list[Point] = []
            if want and (max_restarts is None or restarts < max_restarts):
                for _ in range(want if max_restarts is None else min(want, max_restarts - restarts)):
                    point = self.perturb_best() if restarts % 2 == 0 else self.sample_new()
                    restarts += 1
                    if point is not None and point not in fresh:
                        fresh.append(point)
                for point, r in zip(fresh, self.run_batch(fresh), strict=True):
                    if r is not None and r.score is not None:
                        active.append([point, r.score, False])
                if self.stopped():
                    return
            if not active:
                if fresh:
                    continue  # every restart failed; try others while the budget lasts
                self.stop_reason = "converged"  # nothing left to try
                return
            polls = [self.neighbours(a[0], a[2]) for a in active]
            self.run_batch(p for poll in polls for p in poll)
            if self.stopped():
                return
            survivors: list[list[Any]] = []
            for searcher, poll in zip(active, polls, strict=True):
                scored = [
                    (r.score, p) for p in poll if (r := self.result_at(p)) is not None and r.score is not None
                ]
                best = min(scored, key=lambda sp: sp[0], default=None)
                if best is not None and best[0] < searcher[1]:
                    searcher[:] = [best[1], best[0], False]
                elif not searcher[2]:
                    searcher[2] = True  # one-dimension moves are exhausted here: try two at once
                else:
                    continue  # converged: a restart takes its place
                if all(s[0] != searcher[0] for s in survivors):
                    survivors.append(searcher)
            active = survivors

    def result_at(self, point: Point) -> Evaluated | None:
        key, config = self.config(point)
        return None if config is None else self.results.get(key)


def search(
    space: SearchSpace,
    evaluate: Callable[[Any], Any],
    *,
    executor: Executor | None = None,
    seeds: Sequence[Mapping[str, Any]] = (),
    strategy: Strategy = "auto",
    max_evals: int | None = None,
    max_seconds: float | None = None,
    seed: int = 0,
    exhaustive_threshold: int = DEFAULT_EXHAUSTIVE_THRESHOLD,
    searchers: int = 4,
    initial_samples: int = 16,
    max_restarts: int | None = None,
    progress: Callable[[SearchProgress], None] | None = None,
    progress_interval: float = 0.25,
    on_result: Callable[[Evaluated], None] | None = None,
    on_pruned: Callable[[Mapping[str, Any], str], None] | None = None,
    should_stop: Callable[[], bool] | threading.Event | None = None,
) -> SearchResult:
    """Find the config of `space` with the lowest `evaluate` score within the budget.

    seeds: starting points ({dimension name: value}), e.g. the kernel's default config; evaluated first.
    executor: where evaluate runs (default: inline, in this thread).
    max_evals / max_seconds: budget (evaluations actually run; pruned and repeated configs are free).
    max_restarts: pattern-search restarts after searchers converge; None = unlimited when max_evals or
        max_seconds bounds the run, else 2 × searchers.
    progress: called at most every progress_interval seconds and at the end.
    on_result / on_pruned: called for each evaluation as it arrives / each config pruned, e.g. to store it.
    should_stop: polled between results; a set Event or True ends the search early ("cancelled").
    """
    run = _Search(
        space,
        evaluate,
        executor or InlineExecutor(),
        max_evals=max_evals,
        max_seconds=max_seconds,
        seed=seed,
        progress=progress,
        progress_interval=progress_interval,
        on_result=on_result,
        on_pruned=on_pruned,
        should_stop=should_stop,
    )
    seed_points = [run.point_of(s) for s in seeds]
    if strategy == "auto":
        small = run.size <= exhaustive_threshold or (max_evals is not None and run.size <= max_evals)
        strategy = "exhaustive" if small else "pattern"
    if strategy == "exhaustive":
        run.exhaustive(seed_points)
    elif strategy == "pattern":
        if max_restarts is None and max_evals is None and max_seconds is None:
            max_restarts = 2 * searchers
        run.pattern(seed_points, searchers, initial_samples, max_restarts)
    else:
        raise ValueError(f"unknown strategy {strategy!r}: use auto, exhaustive or pattern")
    run.report(force=True)
    return SearchResult(
        evaluated=list(run.results.values()),
        best=run.best,
        pruned=len(run.pruned_keys),
        pruned_reasons=run.pruned_reasons,
        elapsed=time.monotonic() - run.start,
        strategy=strategy,
        stop_reason=run.stop_reason or "converged",
    )
