"""Refine: the slow evaluator (compile, schedule, tpu) on the model's best candidates, after the search.

A measuring evaluator (the chip itself) also measures the kernel's default config: the model has blind spots a
measurement does not share, and a kernel's default is a config its author chose. On the v5e, attention 8k's
default [1, 256, 256] ran 97.6 ms, the model's pick 104.3 ms. Then it climbs (`climb`): from the best config it
measured, the neighbours the model likes best, while the chip finds a better one. On the v5e the model's four best
batch_softmax configs were 2 MiB blocks one to eight batches deep (3.27-3.30 ms) and the chip's best were 8-row
blocks 16 or 32 batches deep (3.16 ms), one or two steps from them. A deterministic evaluator's stored result for
a config is reused, not redone. With one worker per chip (chip_workers.py), each batch of a measurement fills
every chip.

May import: compiler.ir, this package's correctness, evaluators, executors, keys, objective, search and store.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

from ..ir.config import Config
from ..support.diagnostics import CompileError
from .correctness import CorrectnessResult
from .evaluators import Problem, evaluate, get_evaluator
from .executors import Executor
from .keys import TrialKey
from .objective import objective
from .search import Dimension, is_ordered, neighbour_indices
from .store import TuningStore

CLIMB_ROUNDS = 3  # rounds of neighbours a measuring evaluator tries after the model's best
CLIMB_WIDTH = 4  # neighbours measured per round, the model's best first


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
        if m.get("label"):  # the schedule evaluator's: "TPU compiler estimate"
            out["label"] = m["label"]
        if m.get("measured_on"):  # the tpu evaluator's: which host and chip measured it
            out["measured_on"] = m["measured_on"]
        if self.correctness is not None:
            out["correctness"] = self.correctness.to_json()
        return out


def refine(
    problem: Problem,
    evaluator_name: str,
    count: int,
    ranked: list[Candidate],
    executor: Executor,
    key: TrialKey,
    store: TuningStore | None,
    run_id: str | None,
    rejected: list[dict[str, Any]],
    deadline: float | None = None,
) -> list[Candidate]:
    """The slow evaluator on the model's best candidates, best first, until `count` succeed (and, for a
    measurement, the default config too, then the climb until `deadline`, a time.monotonic() value: the run's
    --budget); the successful ones, best first."""
    evaluator = get_evaluator(evaluator_name)
    if not evaluator.estimated:
        ranked, count = with_default(problem, ranked, count)
    kept: list[Candidate] = []
    fn = functools.partial(evaluate, problem, evaluator_name)
    width = 1 if evaluator.serial else executor.parallelism
    known = stored_outcomes(store, key) if evaluator.deterministic else {}
    pos = 0

    def measure(batch: list[Candidate]) -> None:
        configs = [c.config for c in batch if Config(c.config) not in known]
        outcomes = {id(config): outcome for config, outcome in executor.map_unordered(fn, configs)}
        for cand in batch:
            reused = known.get(Config(cand.config))
            outcome = reused or outcomes[id(cand.config)]
            if isinstance(outcome, BaseException):
                raise outcome
            seconds, info = outcome
            if store is not None and reused is None:
                store.record_trial(key, cand.config, seconds, "ok" if seconds is not None else "failed", info, run_id)
            if seconds is None:
                rejected.append({"config": cand.config, "evaluator": evaluator_name, "why": info.get("error", "unusable")}
                                | ({"measured_on": info["measured_on"]} if "measured_on" in info else {}))
            else:
                kept.append(Candidate(cand.config, seconds, info, evaluator_name))

    while len(kept) < count and pos < len(ranked) and pos < 4 * count:
        batch = ranked[pos : pos + batch_size(count - len(kept), width, evaluator.estimated)]
        pos += len(batch)
        measure(batch)
    if not evaluator.estimated and kept:
        tried = {Config(c.config) for c in ranked[:pos]}
        for _ in range(CLIMB_ROUNDS):
            if deadline is not None and time.monotonic() > deadline:
                break
            best = min(kept, key=rank)
            batch = climb(problem, best.config, tried)[: max(CLIMB_WIDTH, width)]
            tried |= {Config(c.config) for c in batch}
            measure(batch)
            if not batch or min(kept, key=rank) is best:
                break
    return sorted(kept, key=rank)


def batch_size(wanted: int, width: int, estimated: bool) -> int:
    """Candidates to hand the executor at once: those still `wanted`, at most `width` (its parallelism); a
    measurement fills every chip (chip_workers.py: one worker per chip), as the extra ones cost no wall time."""
    size = max(1, min(wanted, width))
    return size if estimated else max(size, width)


def rank(c: Candidate) -> float:
    """What candidates are ordered by: the tuning objective (speed, with the VMEM margin)."""
    return objective(c.seconds, c.metrics)


def climb(problem: Problem, config: dict[str, Any], tried: set[Config]) -> list[Candidate]:
    """The neighbours of `config` in the kernel's config space not in `tried`, fastest by the model's estimate
    first: one dimension one step (a numeric dimension to the next value up or down, another to each other
    value), or two at once (a block grows where another shrinks: the same bytes in another shape). Those that do
    not compile or fit VMEM are left out. The VMEM margin does not order them: it hedges a pick by estimate, and
    these are to be measured (on the v5e it put attention's `[1, 256, 256]` with buffers `[2, 1, 1]`, 100.5 ms,
    and 128-row blocks ahead of `[1, 512, 256]`, 93.4 ms)."""
    space = problem.load_kernel().config_space(problem.args, problem.chip)
    dims = [Dimension(name, tuple(values)) for name, values in space.dimensions]
    point = space.point_of(Config(config))

    def moves(d: Dimension) -> list[Any]:  # the values one step from the config's, as the search steps
        if point[d.name] not in d.values:
            return []
        return [d.values[j] for j in neighbour_indices(d, is_ordered(d), d.values.index(point[d.name]))]

    single = [(d.name, v) for d in dims for v in moves(d)]
    changes = [[m] for m in single] + [[a, b] for i, a in enumerate(single) for b in single[i + 1 :] if a[0] != b[0]]
    seen, out = set(tried), []
    for change in changes:
        near = space.to_config(point | dict(change))
        if near in seen:
            continue
        seen.add(near)
        seconds, info = evaluate(problem, "model", dict(near))
        if seconds is not None and info.get("vmem_verdict") != "out_of_vmem":
            out.append(Candidate(dict(near), seconds, info, "model"))
    return sorted(out, key=lambda c: c.seconds)


def with_default(problem: Problem, ranked: list[Candidate], count: int) -> tuple[list[Candidate], int]:
    """`ranked` with the kernel's default config moved into the first `count + 1` when the search scored it and
    the model did not rank it that high, and how many to refine then."""
    try:
        default = Config(problem.load_kernel().default_config(problem.args, problem.chip))
    except CompileError:  # no default to measure: the model's best stand alone
        return ranked, count
    at = next((i for i, c in enumerate(ranked) if Config(c.config) == default), None)
    if at is None or at < count:
        return ranked, count
    return [*ranked[:count], ranked[at], *ranked[count:at], *ranked[at + 1 :]], count + 1


def stored_outcomes(store: TuningStore | None, key: TrialKey) -> dict[Config, tuple[float | None, dict[str, Any]]]:
    """(seconds, info) of every config the store has a result for under `key` (the latest one each)."""
    if store is None:
        return {}
    out: dict[Config, tuple[float | None, dict[str, Any]]] = {}
    for t in store.trials(key):
        if t.verdict in ("ok", "failed"):
            info = dict(t.metrics) | ({"error": t.metrics.get("error", "unusable")} if t.seconds is None else {})
            out[Config(t.config)] = (t.seconds, info)
    return out
