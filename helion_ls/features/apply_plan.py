"""What *Apply* writes for a kernel with several shape sets: one `config=` or one config per shape set.

A config tuned for one shape set can be wrong for another: too big for its VMEM (attention's 8k config at
32k), or simply not the best there. So *Apply* on shape set i of a kernel with several shape sets writes
`configs=[c0, c1, …]` (one `helion.Config` per shape set, in order: upstream Helion takes the list as the
configs it may use, this compiler gives entry j to shape set j) when another shape set has a different
stored best, or when the config does not compile cleanly for another shape set; each other entry is that
set's stored best, else this config where it fits, else the config that set compiles with now. Fit is
checked by compiling (in the compile workers, remembered per unit and config). The lens and the command
share `plan_for`, so the lens title says what the command will write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from compiler.config import Config

from ..analysis import compile_request
from ..documents import KernelView, Loaded, Unit
from ..lru import LruCache
from ..server import HelionServer
from ..store import Summary
from . import codelens

FITS: LruCache[bool] = LruCache(512)  # (unit key, config json) -> compiles without errors


@dataclass(frozen=True)
class ApplyPlan:
    configs: list[dict[str, Any]] | None  # None: one `config=` for every shape set
    why: str = ""  # for per-shape-set configs: which shape set needs its own, and why

    @property
    def title(self) -> str:
        return "Apply (configs=[…] per shape set)" if self.configs is not None else "Apply"


async def fits(ls: HelionServer, loaded: Loaded, view: KernelView, unit: Unit, config: dict[str, Any]) -> bool:
    """Whether `config` compiles for `unit` without an error diagnostic (VMEM included)."""
    key = (unit.key, json.dumps(config, sort_keys=True))
    known = FITS.get(key)
    if known is not None:
        return known
    request = {**compile_request(loaded, view, unit), "config": Config(config).to_json()}
    answer = await ls.pool.run(("fit", *key), request, lambda why: {"diagnostics": [], "compiled": None})
    ok = answer["compiled"] is not None and not any(d.is_error for d in answer["diagnostics"])
    FITS.put(key, ok)
    return ok


async def plan_for(
    ls: HelionServer,
    loaded: Loaded,
    view: KernelView,
    shape_set: int,
    config: dict[str, Any],
    bests: list[Summary | None],
) -> ApplyPlan:
    """What applying `config` (shape set `shape_set`'s choice) writes; `bests[j]`: shape set j's stored best."""
    if len(view.units) < 2:
        return ApplyPlan(None)
    chosen = Config(config)
    entries: list[dict[str, Any]] = []
    reasons: list[str] = []
    for unit in view.units:
        j = unit.index
        best = bests[j].best.config if j < len(bests) and bests[j] is not None else None
        if j == shape_set:
            entries.append(dict(config))
        elif best is not None and Config(best) != chosen:
            entries.append(dict(best))
            reasons.append(f"shape set {j} has its own best")
        elif await fits(ls, loaded, view, unit, config):
            entries.append(dict(config))
        else:
            current, _ = codelens.current_config(ls, view, unit)
            if current is None:
                raise ValueError(f"the config does not fit shape set {j}, which has no other config yet: tune it")
            entries.append(dict(current))
            reasons.append(f"it does not fit shape set {j}")
    if not reasons:
        return ApplyPlan(None)
    return ApplyPlan(entries, "; ".join(reasons))


async def stored_bests(ls: HelionServer, loaded: Loaded, view: KernelView) -> list[Summary | None]:
    """The store's best per shape set of `view` (None where nothing is stored)."""
    store = ls.store_for(ls.settings.for_uri(loaded.uri))
    keys = [(codelens.trial_key(u), None) for u in view.units]
    found = await ls.pool.call(store.summaries, keys) if keys else {}
    return [found.get(k) if u.args else None for k, u in zip(keys, view.units, strict=True)]
