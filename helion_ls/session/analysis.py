"""The staged analysis of one document version, and what gets published from it.

  load    compiler.load in a thread -> `Loaded` (kernels, units, keys); no compile. What it found (a bad
          shape line, a syntax error) is published at once, before any compile (no stage notification).
          Kernels without a shape line first get the shapes the file's calls give them from a compile worker
  recall  every stage's remembered result of each unit not in memory (remembered.py, from the analysis
          cache on disk that every process shares)                                      -> publish
  front   every unit through `Kernel.compile` in the compile workers (cache hits are free) -> publish
          (also while they run: each kernel's diagnostics as it finishes, at most every 0.25 s)
  lower   Mosaic lowering of every unit that compiled, in the check worker               -> publish
          (it and the later stages wait while a tuning the user started runs: foreground.py)
  tpu     libtpu deviceless compile (setting `libtpu`), in the check worker              -> publish
  confirm each remembered front result is compiled again at low priority (after every other compile);
          a differing result replaces it, its lowering and libtpu results are dropped and redone -> publish.
          Lowering and libtpu results are never redone for a kernel whose compile is unchanged.

Fresh results (never a failed worker's) are remembered for the next process.

Each publish carries the document version and is made only while that version is still the latest;
results for older versions are kept in the cache (the next version may reuse them) but never shown.
A publish is the union, per unit, of every stage's result for the unit's key, so a stage's new result
replaces its earlier one and results of an edited kernel disappear with its old key. After each publish
`on_stage(uri, version, stage, final)` runs, so clients and benchmarks can tell the last one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compiler.frontend.call_shapes import InferredShapes
from compiler.frontend.notebook import NotebookModule
from compiler.results import STAGES, UnitKey
from compiler.support.diagnostics import Diagnostic, Range, error, warning

from ..wire.layout import Layout
from ..wire.lsp import diagnostic_from_json
from ..workers.check_client import CheckClient, Skipped, WorkerFailure
from ..workers.compile_pool import CompilePool
from .compose import compose, needs_check
from .documents import (
    HELION_HINT,
    KernelView,
    Loaded,
    ResultCache,
    StageResult,
    Unit,
    file_name,
    file_path,
    load_document,
    remap,
)
from .lru import LruCache
from .remembered import Remembered, document_parts

log = logging.getLogger(__name__)
PARTIAL_INTERVAL = 0.25  # seconds between publishes while a document's kernels compile


@dataclass
class DocState:
    uri: str
    version: int | None
    text: str
    layout: Layout  # which client documents show the text's lines (the file, or a notebook's cells)
    notebook: NotebookModule | None = None  # for a notebook: the module its code cells make
    mentions_helion: bool = True  # the text (a notebook: one of its cells) says "helion": it may hold kernels
    open: bool = True  # False: a closed file analysed because it changed on disk
    force_compile: bool = False  # the file changed on disk: the next analysis compiles even on a plain change
    loaded: Loaded | None = None
    published: set[str] = field(default_factory=set)  # client documents shown diagnostics (closing clears them)
    pending: asyncio.Task | None = None  # debounce timer or running analysis started by a change
    final_version: int | None = None  # the last version whose every stage was published


def compile_request(loaded: Loaded, view: KernelView, unit: Unit) -> dict[str, Any]:
    """What the compile worker needs for one unit (see compile_worker.py)."""
    return {
        "source": loaded.text,
        "kernel": view.name,
        "args": unit.args,
        "config": unit.config.to_json() if unit.config is not None else None,
        "chip": unit.key.chip,
        "decorator_range": view.decorator_range,
        "file": unit.key.file,
        "where": file_path(loaded.uri),
        "notebook": loaded.notebook,
    }


class Analyzer:
    def __init__(
        self,
        pool: CompilePool,
        checks: CheckClient,
        publish: Callable[[str, int | None, list[dict[str, Any]]], None],
        on_stage: Callable[[str, int | None, str, bool], None],
        on_loaded: Callable[[Loaded], None],
        encoding: Callable[[], str],
        remembered: Remembered | None = None,
    ):
        self.pool = pool
        self.checks = checks
        self.cache = ResultCache()
        self.remembered = remembered or Remembered(None)
        self._transient: LruCache[StageResult] = LruCache(256)  # worker failures: shown, never cached
        self._unconfirmed: set[UnitKey] = set()  # front results recalled and not yet compiled again
        self._failed: set[Any] = set()  # units (and texts' call shapes) whose worker failed: shown, not remembered
        self.docs: dict[str, DocState] = {}
        self.owners: dict[str, str] = {}  # a notebook cell's URI -> the notebook's
        # work actually done (for helion/stats): recalled / confirmed / replaced count remembered results
        self.counts = {"loads": 0, "checks": 0, "recalled": 0, "confirmed": 0, "replaced": 0}
        self.tuned: dict[Any, str] = {}  # unit key -> why tuning picked its config (see `set_tuned`)
        self._publish = publish
        self._on_stage = on_stage
        self._on_loaded = on_loaded
        self._encoding = encoding

    # -- document lifecycle --------------------------------------------------------------------------
    def update(self, uri: str, version: int | None, text: str, is_open: bool = True) -> DocState:
        state = self._update(uri, version, text, Layout.file(uri, version, text), None, is_open)
        state.mentions_helion = bool(HELION_HINT.search(text))
        return state

    def update_notebook(
        self, uri: str, version: int | None, module: NotebookModule, versions: dict[str, int | None],
        mentions_helion: bool,
    ) -> DocState:
        """A notebook's new state: `module` made of its code cells, keyed by their URIs (at `versions`)."""
        layout = Layout.notebook(uri, module, versions)
        self._forget_cells(uri)
        self.owners.update((part.uri, uri) for part in layout.parts)
        state = self._update(uri, version, module.text, layout, module, True)
        state.mentions_helion = mentions_helion
        return state

    def _update(
        self, uri: str, version: int | None, text: str, layout: Layout, notebook: NotebookModule | None, is_open: bool
    ) -> DocState:
        state = self.docs.get(uri)
        if state is None:
            state = self.docs[uri] = DocState(uri, version, text, layout, notebook, open=is_open)
        state.version, state.text, state.layout, state.notebook = version, text, layout, notebook
        state.open = state.open or is_open
        return state

    def state(self, uri: str) -> DocState | None:
        """The analysed document `uri` belongs to: itself, or the notebook of a cell."""
        return self.docs.get(uri) or self.docs.get(self.owners.get(uri, ""))

    def close(self, uri: str) -> None:
        state = self.docs.pop(uri, None)
        self._forget_cells(uri)
        if state is None:
            return
        if state.pending is not None:
            state.pending.cancel()
        for shown in sorted(state.published):
            self._publish(shown, None, [])

    def _forget_cells(self, uri: str) -> None:
        for cell in [cell for cell, owner in self.owners.items() if owner == uri]:
            del self.owners[cell]

    def is_current(self, uri: str, version: int | None, text: str | None = None) -> bool:
        state = self.docs.get(uri)
        return state is not None and state.version == version and (text is None or state.text == text)

    # -- stages ----------------------------------------------------------------------------------------
    async def load(self, uri: str, chip: str) -> Loaded | None:
        """Parse the document's current text (reusing the last parse of the same text and chip)."""
        state = self.docs.get(uri)
        if state is None:
            return None
        loaded = state.loaded
        if loaded is not None and loaded.text == state.text and _chip_of(loaded) in (chip, None):
            loaded.version, loaded.layout, loaded.notebook = state.version, state.layout, state.notebook
            return loaded
        version, text, layout = state.version, state.text, state.layout
        self.counts["loads"] += 1
        notebook, mentions = state.notebook, state.mentions_helion
        loaded = await self.pool.call(load_document, uri, version, text, chip, None, notebook, mentions)
        if loaded.needs_call_shapes and self.is_current(uri, version, text):
            shapes = await self.call_shapes(text, file_name(uri), notebook, file_path(uri))
            loaded = await self.pool.call(load_document, uri, version, text, chip, shapes, notebook, mentions)
        loaded.layout = layout  # the documents that showed this text (a notebook's cells)
        if self.is_current(uri, version, text):
            state.loaded = loaded
            self._on_loaded(loaded)
        return loaded

    async def call_shapes(self, text: str, file: str, notebook: NotebookModule | None = None,
                          where: str | None = None) -> Any:
        """The shapes the file's own calls give its kernels without a shape line, found by a compile worker
        (it has torch; this process does not import it). A worker that fails costs the shapes, said once.
        A notebook's cells name the lines in their labels (`from check(512, 1024) at cell 7:2`)."""
        key = ("call_shapes", hashlib.sha256(text.encode()).hexdigest(), notebook.cells if notebook else None, where)

        def failed(why: str) -> dict[str, Any]:
            self._failed.add(key)  # this text's publish is not remembered
            note = warning("HPL112", f"finding kernel shapes from this file's calls did not finish: {why}",
                           Range.lines(0))
            return {"call_shapes": InferredShapes(diagnostics=[note])}

        request = {"kind": "call_shapes", "source": text, "file": file, "notebook": notebook, "where": where}
        answer = await self.pool.run(key, request, failed)
        return answer["call_shapes"]

    async def analyze(self, uri: str, chip: str, libtpu: bool) -> None:
        """All stages for the current version; returns early once a newer version exists."""
        state = self.docs.get(uri)
        if state is None:
            return
        version, text = state.version, state.text
        loaded = await self.load(uri, chip)
        if loaded is None or not self.is_current(uri, version, text):
            return
        if not loaded.kernels and not loaded.diagnostics:
            self._publish_now(state, loaded, quiet=True)
            return
        if loaded.diagnostics:  # seconds before a cold worker can compile anything
            self._publish_now(state, loaded)
        units = [(view, unit) for view in loaded.kernels.values() for unit in view.units]
        if await self.recall(units, libtpu) and self.is_current(uri, version, text):
            self._publish_now(state, loaded)
        partial = _Throttled(lambda: self.is_current(uri, version, text) and self._publish_now(state, loaded))

        async def front(view: KernelView, unit: Unit) -> None:
            if await self.ensure_front(loaded, view, unit):
                partial.request()  # each kernel's diagnostics as soon as it compiled

        try:
            await asyncio.gather(*(front(view, unit) for view, unit in units))
        finally:
            partial.cancel()
        if not self.is_current(uri, version, text):
            return
        stages = ["lower", "tpu"] if libtpu else ["lower"]
        pending = [s for s in stages if any(self._needs(s, view, unit, ahead=True) for view, unit in units)]
        shown = self._publish_now(state, loaded)
        self._stage_done(state, version, "front", not pending)
        if not pending:
            self._remember_document(loaded, units, chip, libtpu, shown)
        if pending:
            await self.pool.foreground.idle("the check worker")  # a tuning the user started goes first
            if not self.is_current(uri, version, text):
                return
            self.checks.prestart()  # after the first diagnostics: its imports would compete with compiles
        for i, stage in enumerate(pending):
            wanted = lambda: self.is_current(uri, version, text)  # noqa: E731
            await asyncio.gather(*(self._check(stage, loaded, view, unit, wanted) for view, unit in units))
            if not wanted():
                return
            shown = self._publish_now(state, loaded)
            self._stage_done(state, version, stage, i == len(pending) - 1)
        if pending:
            self._remember_document(loaded, units, chip, libtpu, shown)
        if await self._confirm(loaded, units) and self.is_current(uri, version, text):
            await self.analyze(uri, chip, libtpu)  # a replaced result: publish it and redo its checks

    def _stage_done(self, state: DocState, version: int | None, stage: str, final: bool) -> None:
        if final:
            state.final_version = version
        self._on_stage(state.uri, version, stage, final)

    def _remember_document(self, loaded: Loaded, units: list[tuple[KernelView, Unit]], chip: str, libtpu: bool,
                           shown: dict[str, list[dict[str, Any]]]) -> None:
        """Keep a file's complete publish for the next opening of the same text, unless a worker failed in it
        (not a notebook's: its cells are documents of their own, whose URIs belong to one editor session)."""
        if loaded.notebook is not None:
            return
        keys = {unit.key for _, unit in units} | {("call_shapes", hashlib.sha256(loaded.text.encode()).hexdigest(), None)}
        if keys & self._failed or any(self._transient.get((s, k)) is not None for s in STAGES for k in keys):
            return
        parts = document_parts(loaded.uri, loaded.text, chip, libtpu, self._encoding())
        self.remembered.keep_document(parts, shown.get(loaded.uri, []))

    async def recall(self, units: list[tuple[KernelView, Unit]], libtpu: bool) -> bool:
        """Bring the remembered results of units not in memory from disk; True when some came."""
        stages = STAGES if libtpu else STAGES[:2]
        wanted = [(stage, view, unit) for view, unit in units for stage in stages
                  if self.cache.stages[stage].get(unit.key) is None]
        if not wanted:
            return False
        found = await self.pool.call(self.remembered.recall, wanted)
        for (stage, key), result in found.items():
            if self.cache.stages[stage].get(key) is None:  # a compile may have finished meanwhile
                self.cache.put(stage, result)
                if stage == "front":
                    self._unconfirmed.add(key)
        self.counts["recalled"] += len(found)
        return bool(found)

    async def _confirm(self, loaded: Loaded, units: list[tuple[KernelView, Unit]]) -> bool:
        """Compile each recalled front result again (at low priority); True when one was replaced."""
        todo = {unit.key: (view, unit) for view, unit in units if unit.key in self._unconfirmed}
        if not todo:
            return False
        replaced = await asyncio.gather(*(self._confirm_one(loaded, view, unit) for view, unit in todo.values()))
        return any(replaced)

    async def _confirm_one(self, loaded: Loaded, view: KernelView, unit: Unit) -> bool:
        answer = await self.pool.run(("confirm", unit.key), compile_request(loaded, view, unit), _failed(view),
                                     low_priority=True)
        if unit.key not in self._unconfirmed or answer.get("failed"):
            return False  # confirmed meanwhile, or the worker failed (try again next time)
        self._unconfirmed.discard(unit.key)
        old = self.cache.get("front", unit.key, view)
        fresh = StageResult(unit.key, view.source, tuple(answer["diagnostics"]), answer["compiled"],
                            answer.get("seconds", 0.0))
        self.cache.put("front", fresh)
        if old is not None and _same_front(old, fresh, view):
            self.counts["confirmed"] += 1
            if old[0].basis is not view.source:  # remember it on this text: the next recall maps nothing
                self.remembered.keep("front", fresh)
            return False
        log.info("the remembered result of %s (%s) differs from a fresh compile; replaced", view.name,
                 unit.key.shape_key or "no shape set")
        self.counts["replaced"] += 1
        for stage in STAGES[1:]:
            self.cache.stages[stage].pop(unit.key)
        self.remembered.keep("front", fresh)
        await self.pool.call(self.remembered.forget, [(stage, unit.key) for stage in STAGES[1:]])
        return True

    def has_untunable_units(self, uri: str) -> bool:
        """Some shape set of the document's current text cannot be tuned (its lens offers no Tune)."""
        state = self.docs.get(uri)
        loaded = state.loaded if state is not None else None
        if loaded is None:
            return False
        for view in loaded.kernels.values():
            for unit in view.units:
                hit = self.cache.get("front", unit.key, view)
                if hit is not None and hit[0].untunable:
                    return True
        return False

    def _needs(self, stage: str, view: KernelView, unit: Unit, ahead: bool = False) -> bool:
        return needs_check(stage, self._cached, view, unit, ahead)

    def _cached(self, stage: str, view: KernelView, unit: Unit) -> tuple[StageResult, Any] | None:
        return self.cache.get(stage, unit.key, view)

    async def ensure_front(self, loaded: Loaded, view: KernelView, unit: Unit) -> bool:
        """Compile `unit` unless its result is cached; True when a new result arrived."""
        if self.cache.get("front", unit.key, view) is not None:
            return False
        answer = await self.pool.run(unit.key, compile_request(loaded, view, unit), _failed(view))
        diags = tuple(answer["diagnostics"])
        result = StageResult(unit.key, view.source, diags, answer["compiled"], answer.get("seconds", 0.0))
        self.cache.put("front", result)
        self._unconfirmed.discard(unit.key)
        if answer.get("failed"):
            self._failed.add(unit.key)
        else:
            self._failed.discard(unit.key)
            self.remembered.keep("front", result)
        return True

    async def _check(self, stage: str, loaded: Loaded, view: KernelView, unit: Unit, wanted) -> None:
        if not self._needs(stage, view, unit):
            return
        request = {
            "stage": stage,
            "source": loaded.text,
            "where": file_path(loaded.uri),
            "kernel": view.name,
            "args": unit.key.shape_key or None,
            "config": unit.config.to_json() if unit.config is not None else None,
            "chip": unit.key.chip,
        }
        self.counts["checks"] += 1
        try:
            found = await self.checks.request(request, wanted)
        except Skipped:
            return
        except WorkerFailure as exc:  # not cached: the next save tries again
            what = "Mosaic lowering" if stage == "lower" else "libtpu compile"
            log.warning("%s check of %s failed: %s", what, view.name, exc)
            self._transient.put(
                (stage, unit.key),
                StageResult(
                    unit.key,
                    view.source,
                    (warning("HPL900", f"{what} check did not finish: {exc}", view.decorator_range),),
                ),
            )
            return
        diags = tuple(diagnostic_from_json(d) for d in found)
        self._transient.pop((stage, unit.key))
        result = StageResult(unit.key, view.source, diags)
        self.cache.put(stage, result)
        self.remembered.keep(stage, result)

    # -- tuning notes -----------------------------------------------------------------------------------
    def set_tuned(self, uri: str, notes: dict[Any, str | None]) -> None:
        """Units whose config is a tuned pick over the default scoped VMEM, with why it is worth it (None:
        no longer). Their HPL301 says so and their HPL501 warning goes: the document is published again
        when that changes."""
        changed = False
        for key, note in notes.items():
            if self.tuned.get(key) != note:
                changed = True
                if note is None:
                    self.tuned.pop(key, None)
                else:
                    self.tuned[key] = note
        state = self.docs.get(uri)
        if changed and state is not None and state.loaded is not None and state.published:
            self._publish_now(state, state.loaded)

    def _noted(self, diag: Diagnostic, unit: Unit) -> Diagnostic | None:
        note = self.tuned.get(unit.key)
        if note is None or diag.code not in ("HPL301", "HPL501"):
            return diag
        if diag.code == "HPL501":
            return None
        return dataclasses.replace(diag, message=f"{diag.message}. {note}")

    # -- publishing ------------------------------------------------------------------------------------
    def _publish_now(self, state: DocState, loaded: Loaded, quiet: bool = False) -> dict[str, list[dict[str, Any]]]:
        """Publish to every client document of the layout that has diagnostics or had some (a file always,
        unless `quiet`), and clear the documents that left it (a deleted cell); returns what was composed."""
        found = self.compose(loaded)
        shown = {part.uri for part in loaded.layout.parts}
        for uri in sorted(state.published - shown):
            self._publish(uri, None, [])
        for part in loaded.layout.parts:
            diags = found.get(part.uri, [])
            if diags or part.uri in state.published or (part.uri == loaded.uri and not quiet):
                self._publish(part.uri, part.version, diags)
        state.published = {uri for uri, diags in found.items() if diags}
        return found

    def compose(self, loaded: Loaded) -> dict[str, list[dict[str, Any]]]:
        """Every stage's diagnostics for the units of `loaded`, by the client document showing them (LSP JSON)."""
        return compose(loaded, self._lookup, self._encoding(), self._noted)

    def _lookup(self, stage: str, view: KernelView, unit: Unit) -> tuple[StageResult, Any] | None:
        hit = self.cache.get(stage, unit.key, view)
        if hit is not None:
            return hit
        transient = self._transient.get((stage, unit.key))
        return (transient, None) if transient is not None else None


def _failed(view: KernelView) -> Callable[[str], dict[str, Any]]:
    """The answer standing in for a compile whose worker failed (shown, never remembered)."""

    def failed(why: str) -> dict[str, Any]:
        return {"diagnostics": [error("HPL900", f"the compiler {why}", view.decorator_range)], "compiled": None,
                "failed": True}

    return failed


def _same_front(old: tuple[StageResult, Any], fresh: StageResult, view: KernelView) -> bool:
    """A fresh compile confirms a remembered one: the same diagnostics where they are shown, and the same
    generated module, plan and VMEM report (position-free parts only when it was computed on other text)."""
    result, pmap = old
    if _diagnostic_keys(remap(d, pmap) for d in result.diagnostics) != _diagnostic_keys(fresh.diagnostics):
        return False
    a, b = result.compiled, fresh.compiled
    if a is None or b is None:
        return a is b
    if result.basis.segment == view.source.segment and result.basis.first_line == view.source.first_line:
        return a == b
    return (a.config, a.chip, _without_places(a.vmem)) == (b.config, b.chip, _without_places(b.vmem))


def _without_places(vmem: Any) -> Any:
    """A VMEM report whose rows do not say where they come from (their range, and labels naming its line)."""
    return dataclasses.replace(vmem, rows=tuple(dataclasses.replace(r, range=None, label="") for r in vmem.rows))


def _diagnostic_keys(diags: Any) -> list[tuple[Any, str]]:
    return sorted(((d, json.dumps(d.data, sort_keys=True, default=str)) for d in diags), key=repr)


class _Throttled:
    """Calls `fn` at once on the first request, then at most once per PARTIAL_INTERVAL while requests come."""

    def __init__(self, fn: Callable[[], object]):
        self._fn = fn
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def request(self) -> None:
        if self._timer is not None:
            return
        wait = self._last + PARTIAL_INTERVAL - time.monotonic()
        if wait <= 0:
            self._fire()
        else:
            self._timer = asyncio.get_running_loop().call_later(wait, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._last = time.monotonic()
        self._fn()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _chip_of(loaded: Loaded) -> str | None:
    for view in loaded.kernels.values():
        return view.units[0].key.chip
    return None
