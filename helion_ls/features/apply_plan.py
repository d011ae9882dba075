"""What *Apply* writes for a kernel with several shape sets: one `config=` or one config per shape set.

Applying shape set i's tuned config must not undo the other shape sets: each other set j keeps, in this
order, the first of these that compiles cleanly for it — no error and no TPU-legality diagnostic (HPL2xx:
a block size we would raise is one we call illegal) —
  the config the decorator gives it now (applied earlier), its stored best (tuned, not applied yet),
  shape set i's config, the config it compiles with now (the default);
and when every set ends up with the same config the edit is one `config=`, else `configs=[c0, c1, …]` (one
`helion.Config` per shape set, in order: upstream Helion takes the list as the configs it may use, this
compiler gives entry j to shape set j). Cleanliness is checked by compiling (in the compile workers,
remembered per unit and config). The lens and the command share `plan_for`, so the lens title says what the
command will write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from compiler.ir.config import Config

from ..session.analysis import compile_request
from ..session.documents import KernelView, Loaded, Unit
from ..session.lru import LruCache
from ..session.store import Summary
from .host import Host
from .kernels import current_config, trial_key

CLEAN: LruCache[bool] = LruCache(512)  # (unit key, config json) -> compiles without error or HPL2xx


class Unknown(Exception):
    """`plan_for(..., known_only=True)` needs a compile whose answer is not known yet."""


@dataclass(frozen=True)
class ApplyPlan:
    configs: list[dict[str, Any]] | None  # None: one `config=` for every shape set
    why: str = ""  # for per-shape-set configs: which shape set keeps its own, and why

    @property
    def title(self) -> str:
        return "Apply (configs=[…] per shape set)" if self.configs is not None else "Apply"


def _illegal(diag: Any) -> bool:
    return diag.is_error or diag.code.startswith("HPL2")


async def clean(
    ls: Host, loaded: Loaded, view: KernelView, unit: Unit, config: dict[str, Any], known_only: bool = False
) -> bool:
    """Whether `config` compiles for `unit` with no error (VMEM included) and nothing we call illegal;
    `known_only`: raise Unknown rather than compile."""
    key = (unit.key, json.dumps(config, sort_keys=True))
    known = CLEAN.get(key)
    if known is not None:
        return known
    if known_only:
        raise Unknown(key)
    request = {**compile_request(loaded, view, unit), "config": Config(config).to_json()}
    answer = await ls.pool.run(("fit", *key), request, lambda why: {"diagnostics": [], "compiled": None})
    ok = answer["compiled"] is not None and not any(_illegal(d) for d in answer["diagnostics"])
    CLEAN.put(key, ok)
    return ok


async def plan_for(
    ls: Host,
    loaded: Loaded,
    view: KernelView,
    shape_set: int,
    config: dict[str, Any],
    bests: list[Summary | None],
    known_only: bool = False,
) -> ApplyPlan:
    """What applying `config` (shape set `shape_set`'s choice) writes; `bests[j]`: shape set j's stored best.
    `known_only` (for lenses, which must not wait on compiles): raise Unknown when a compile is needed."""
    if len(view.units) < 2:
        return ApplyPlan(None)
    chosen = Config(config)
    entries: list[dict[str, Any]] = []
    reasons: list[str] = []
    for unit in view.units:
        j = unit.index
        if j == shape_set:
            entries.append(dict(config))
            continue
        best = bests[j].best.config if j < len(bests) and bests[j] is not None else None
        current, _ = current_config(ls, view, unit)
        options = [
            (unit.config, f"shape set {j} keeps its applied config"),
            (best, f"shape set {j} has its own tuned best"),
            (chosen, ""),
            (current, f"the config does not fit shape set {j} cleanly"),
        ]
        for candidate, why in options:
            if candidate is not None and await clean(ls, loaded, view, unit, dict(candidate), known_only):
                entries.append(dict(candidate))
                if Config(candidate) != chosen:
                    reasons.append(why)
                break
        else:
            raise ValueError(f"no config compiles cleanly for shape set {j}: tune it")
    if all(Config(e) == chosen for e in entries):
        return ApplyPlan(None)
    return ApplyPlan(entries, "; ".join(dict.fromkeys(reasons)))


async def stored_bests(ls: Host, loaded: Loaded, view: KernelView) -> list[Summary | None]:
    """The store's best per shape set of `view` (None where nothing is stored)."""
    store = ls.store_for(ls.settings.for_uri(loaded.uri))
    keys = [(trial_key(u), None) for u in view.units]
    found = await ls.pool.call(store.summaries, keys) if keys else {}
    return [found.get(k) if u.args else None for k, u in zip(keys, view.units, strict=True)]
