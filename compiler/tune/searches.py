"""Remembered searches: with the model evaluator and no time budget a search is deterministic — the same file,
kernel, shapes, chip, seed points and options give the same results in the same order — so a run keeps what its
search found in the analysis cache and the next run of the same problem takes it instead of searching again (the
search is most of a warm tuning's time: attention's two shape sets, ~2 s each on two cores).

The key holds the whole file's text (imports and helpers included), the kernel's name, the shapes, the chip, the
seed points (the store's best among them) and the options the search reads; the cache adds the compiler's own
source and the versions of torch, jax and libtpu (compiler.results.keys.environment), so a changed model or
compiler never answers. A search stopped by a time budget or cancelled is not kept: another run could go further.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..results import AnalysisCache
    from .search import SearchResult

log = logging.getLogger(__name__)
KEPT_STOPS = ("complete", "converged", "max_evals")  # a search that ran its course, not one cut short by time


def search_parts(source: str, kernel: str, shape_key: str, chip: str, seeds: Sequence[Mapping[str, Any]],
                 options: Mapping[str, Any]) -> list[str]:
    """The analysis-cache key of one search."""
    fields = [source, kernel, shape_key, chip, [dict(s) for s in seeds], dict(options)]
    return ["search", hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()]


def keep(cache: AnalysisCache, parts: list[str], result: SearchResult,
         trials: Sequence[tuple[dict[str, Any], float | None, str, dict[str, Any]]]) -> None:
    """Keep a finished search's results and the trials it recorded (not one a time budget cut short)."""
    if result.stop_reason not in KEPT_STOPS:
        return
    value = {
        "evaluated": [[dict(e.config), e.point, e.score, e.info] for e in result.evaluated],
        "pruned": result.pruned,
        "pruned_reasons": dict(result.pruned_reasons),
        "elapsed": result.elapsed,
        "strategy": result.strategy,
        "stop_reason": result.stop_reason,
        "trials": [list(t) for t in trials],
    }
    try:
        cache.put_snapshots([(parts, value)])
    except (TypeError, ValueError):  # a figure JSON cannot hold: searched again next time
        log.debug("search not remembered", exc_info=True)


def recall(cache: AnalysisCache, parts: list[str]
           ) -> tuple[SearchResult, list[tuple[dict[str, Any], float | None, str, dict[str, Any]]]] | None:
    """A kept search's result and trials, or None."""
    from .search import Evaluated, SearchResult

    found = cache.get_snapshot(parts)
    if not isinstance(found, dict):
        return None
    try:
        evaluated = [Evaluated(config, point, score, info) for config, point, score, info in found["evaluated"]]
        scored = [e for e in evaluated if e.score is not None]
        best = min(scored, key=lambda e: e.score) if scored else None
        result = SearchResult(evaluated, best, found["pruned"], Counter(found["pruned_reasons"]), found["elapsed"],
                              found["strategy"], found["stop_reason"])
        trials = [(config, seconds, status, info) for config, seconds, status, info in found["trials"]]
    except (KeyError, TypeError, ValueError):
        return None
    return result, trials
