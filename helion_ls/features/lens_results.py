"""The tuning result a shape set's lenses show, shared with the message after a tuning (commands.py): whether
a tuning job was for the shape set as it is now, a finished job's best when the store did not keep it, and
times as both write them."""

from __future__ import annotations

from compiler.tune.store import Trial

from ..session.documents import KernelView, Unit
from ..session.store import Summary
from ..workers.tuning import TuneJob


def fmt_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} µs"


def same_problem(job: TuneJob, view: KernelView, unit: Unit, chip: str) -> bool:
    """Was `job` tuning this unit as it is now: the same code, shape set text and chip?"""
    spec = job.spec
    return spec.source_hash == view.source_hash and spec.shape_key == unit.key.shape_key and spec.chip == chip


def unstored_summary(job: TuneJob) -> Summary:
    """A finished job's best as a lens summary (for results the store could not keep)."""
    best = dict(job.best or {})
    trial = Trial(best["config"], best.get("seconds"), "ok", best, evaluated_by(job), job.finished or 0.0)
    return Summary(trial, None, job.evaluated)


def evaluated_by(job: TuneJob) -> str:
    """The evaluator of a job's best: what the tuner says it used (`auto` becomes tpu on a machine with the
    chip, else model), else what it was asked for."""
    named = (job.best or {}).get("evaluator")
    if named:
        return named
    return "model" if job.spec.evaluator == "auto" else job.spec.evaluator
