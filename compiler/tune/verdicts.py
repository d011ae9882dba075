"""Remembered correctness verdicts: the gate's check of a config is kept in the analysis cache, so tuning
the same kernel again (another shape set's run, a cleared results store, the editor after the command line)
does not run the generated code and the eager reference again for a config already checked.

A verdict is keyed by everything the check depends on: the generated module for the reduced shapes, the
kernel's source (the reference runs it), the shapes, block sizes, outputs written in place, the input seed
and — through the cache — the compiler, torch and jax versions; where the check asked the TPU compiler, the
config's module at the real shapes and libtpu's version too. Completed comparisons are kept ("ok", "wrong"),
and so is the TPU compiler's rejection at the real shapes (what it needed included): each costs a libtpu
compile of seconds (attention 8k: ~7 s) that a second run then never repeats. A check that failed to run or
could not run the reference is tried again next time. After a run,
the winner of each (kernel, shape set, chip) is noted too, so the next run can tell before it searches
whether its gate will need a worker at all.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..ir.specs import format_args
from ..results import AnalysisCache

if TYPE_CHECKING:  # correctness imports torch: the tuning command asks `has_winner` before it does
    from .correctness import CorrectnessResult, GateCase

log = logging.getLogger(__name__)
KEPT = ("ok", "wrong")


@functools.cache
def _libtpu_version() -> str:
    try:
        return importlib.metadata.version("libtpu")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _case_parts(case: GateCase, seed: int) -> list[str]:
    fields = [case.module, case.entry, list(case.params), format_args(case.args), case.chip, list(case.mutated),
              case.kernel_source, case.kernel_name, list(case.block_sizes), seed]
    if case.real is not None:  # the TPU compiler was asked: its input and version decide its verdict
        fields += [case.real.source, case.real.entry, list(case.real.args), _libtpu_version()]
    return ["gate", hashlib.sha256(json.dumps(fields).encode()).hexdigest()]


def _kept(verdict: Any, tpu_compiler: Any) -> bool:
    return verdict in KEPT or (verdict == "failed" and tpu_compiler == "rejects")


def _winner_parts(source_hash: str, shape_key: str, chip: str, evaluator: str) -> list[str]:
    return ["gate-winner", source_hash, shape_key, chip, evaluator]


class Verdicts:
    """Verdicts in an analysis cache (the user's by default); every lookup is a miss when there is none."""

    def __init__(self, cache: AnalysisCache | None = None):
        self.cache = cache if cache is not None else AnalysisCache()

    def recall(self, case: GateCase, seed: int) -> CorrectnessResult | None:
        from .correctness import CorrectnessResult

        found = self.cache.get_snapshot(_case_parts(case, seed))
        if not isinstance(found, dict) or not _kept(found.get("verdict"), found.get("tpu_compiler")):
            return None
        try:
            return CorrectnessResult.from_json(found, " (remembered)")
        except (KeyError, TypeError):
            return None

    def keep(self, case: GateCase, seed: int, result: CorrectnessResult) -> None:
        if _kept(result.verdict, result.tpu_compiler):
            self.cache.put_snapshots([(_case_parts(case, seed), result.to_json())])

    def keep_winner(self, source_hash: str, shape_key: str, chip: str, evaluator: str,
                    config: Mapping[str, Any]) -> None:
        self.cache.put_snapshots([(_winner_parts(source_hash, shape_key, chip, evaluator), dict(config))])

    def has_winner(self, source_hash: str, shape_key: str, chip: str, evaluator: str) -> bool:
        """A run of this problem ended with a checked winner before (its verdict is most likely kept)."""
        return isinstance(self.cache.get_snapshot(_winner_parts(source_hash, shape_key, chip, evaluator)), dict)
