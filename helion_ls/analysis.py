"""The staged analysis of one document version, and what gets published from it.

  load   compiler.load in a thread -> `Loaded` (kernels, units, keys); no compile. What it found (a bad
         shape line, a syntax error) is published at once, before any compile (no stage notification).
         Kernels without a shape line first get the shapes the file's calls give them from a compile worker
  front  every unit through `Kernel.compile` in the compile workers (cache hits are free) -> publish
         (also while they run: each kernel's diagnostics as it finishes, at most every 0.25 s)
  lower  Mosaic lowering of every unit that compiled, in the check worker               -> publish
  tpu    libtpu deviceless compile (setting `libtpu`), in the check worker              -> publish

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
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types

from compiler.diagnostics import Diagnostic, Range, error, warning
from compiler.frontend.call_shapes import InferredShapes
from compiler.notebook import NotebookModule

from .check_client import CheckClient, Skipped, WorkerFailure
from .compile_pool import CompilePool
from .documents import (
    HELION_HINT,
    STAGES,
    KernelView,
    Loaded,
    ResultCache,
    StageResult,
    Unit,
    anchored,
    file_name,
    load_document,
    remap,
)
from .layout import Layout
from .lru import LruCache
from .lsp import diagnostic_from_json, to_lsp_diagnostic

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
        "notebook": loaded.notebook,
    }


class Analyzer:
    def __init__(
        self,
        pool: CompilePool,
        checks: CheckClient,
        publish: Callable[[str, int | None, list[types.Diagnostic]], None],
        on_stage: Callable[[str, int | None, str, bool], None],
        on_loaded: Callable[[Loaded], None],
        encoding: Callable[[], str],
    ):
        self.pool = pool
        self.checks = checks
        self.cache = ResultCache()
        self._transient: LruCache[StageResult] = LruCache(256)  # worker failures: shown, never cached
        self.docs: dict[str, DocState] = {}
        self.owners: dict[str, str] = {}  # a notebook cell's URI -> the notebook's
        self.counts = {"loads": 0, "checks": 0}  # work actually done (for helion/stats)
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
            shapes = await self.call_shapes(text, file_name(uri), notebook)
            loaded = await self.pool.call(load_document, uri, version, text, chip, shapes, notebook, mentions)
        loaded.layout = layout  # the documents that showed this text (a notebook's cells)
        if self.is_current(uri, version, text):
            state.loaded = loaded
            self._on_loaded(loaded)
        return loaded

    async def call_shapes(self, text: str, file: str, notebook: NotebookModule | None = None) -> Any:
        """The shapes the file's own calls give its kernels without a shape line, found by a compile worker
        (it has torch; this process does not import it). A worker that fails costs the shapes, said once.
        A notebook's cells name the lines in their labels (`from check(512, 1024) at cell 7:2`)."""

        def failed(why: str) -> dict[str, Any]:
            note = warning("HPL112", f"finding kernel shapes from this file's calls did not finish: {why}",
                           Range.lines(0))
            return {"call_shapes": InferredShapes(diagnostics=[note])}

        key = ("call_shapes", hashlib.sha256(text.encode()).hexdigest(), notebook.cells if notebook else None)
        request = {"kind": "call_shapes", "source": text, "file": file, "notebook": notebook}
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
        self._publish_now(state, loaded)
        self._on_stage(uri, version, "front", not pending)
        if pending:
            self.checks.prestart()  # after the first diagnostics: its imports would compete with compiles
        for i, stage in enumerate(pending):
            wanted = lambda: self.is_current(uri, version, text)  # noqa: E731
            await asyncio.gather(*(self._check(stage, loaded, view, unit, wanted) for view, unit in units))
            if not wanted():
                return
            self._publish_now(state, loaded)
            self._on_stage(uri, version, stage, i == len(pending) - 1)

    def has_failed_units(self, uri: str) -> bool:
        """Some shape set of the document's current text does not compile (its lens offers no Tune)."""
        state = self.docs.get(uri)
        loaded = state.loaded if state is not None else None
        if loaded is None:
            return False
        for view in loaded.kernels.values():
            for unit in view.units:
                hit = self.cache.get("front", unit.key, view)
                if hit is not None and hit[0].compiled is None:
                    return True
        return False

    def _front_ok(self, view: KernelView, unit: Unit) -> StageResult | None:
        hit = self.cache.get("front", unit.key, view)
        return hit[0] if hit else None

    def _needs(self, stage: str, view: KernelView, unit: Unit, ahead: bool = False) -> bool:
        """The unit compiled, has no result for `stage` yet, and (for libtpu) lowered without errors.

        `ahead`: asked before the lowering ran, so a missing lowering result still counts as "will need".
        """
        front = self._front_ok(view, unit)
        if front is None or front.compiled is None or self.cache.get(stage, unit.key, view) is not None:
            return False
        if stage == "tpu":
            lower = self.cache.get("lower", unit.key, view)
            if lower is None:
                return ahead
            return not any(d.is_error for d in lower[0].diagnostics)
        return True

    async def ensure_front(self, loaded: Loaded, view: KernelView, unit: Unit) -> bool:
        """Compile `unit` unless its result is cached; True when a new result arrived."""
        if self.cache.get("front", unit.key, view) is not None:
            return False

        def failed(why: str) -> dict[str, Any]:
            return {"diagnostics": [error("HPL900", f"the compiler {why}", view.decorator_range)], "compiled": None}

        answer = await self.pool.run(unit.key, compile_request(loaded, view, unit), failed)
        diags = tuple(answer["diagnostics"])
        self.cache.put("front", StageResult(unit.key, view.source, diags, answer["compiled"], answer.get("seconds", 0.0)))
        return True

    async def _check(self, stage: str, loaded: Loaded, view: KernelView, unit: Unit, wanted) -> None:
        if not self._needs(stage, view, unit):
            return
        request = {
            "stage": stage,
            "source": loaded.text,
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
        self.cache.put(stage, StageResult(unit.key, view.source, diags))

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
    def _publish_now(self, state: DocState, loaded: Loaded, quiet: bool = False) -> None:
        """Publish to every client document of the layout that has diagnostics or had some (a file always,
        unless `quiet`), and clear the documents that left it (a deleted cell)."""
        found = self.compose(loaded)
        shown = {part.uri for part in loaded.layout.parts}
        for uri in sorted(state.published - shown):
            self._publish(uri, None, [])
        for part in loaded.layout.parts:
            diags = found.get(part.uri, [])
            if diags or part.uri in state.published or (part.uri == loaded.uri and not quiet):
                self._publish(part.uri, part.version, diags)
        state.published = {uri for uri, diags in found.items() if diags}

    def compose(self, loaded: Loaded) -> dict[str, list[types.Diagnostic]]:
        """Every stage's diagnostics for the units of `loaded`, by the client document showing them."""
        enc = self._encoding()
        out = [to_lsp_diagnostic(d, loaded.layout, enc) for d in loaded.diagnostics]
        shown = set(loaded.diagnostics)  # a kernel whose only shape line is bad: that line's error, once
        for view in loaded.kernels.values():
            groups: dict[Diagnostic, list[int]] = {}
            for unit in view.units:
                for stage in STAGES:
                    hit = self.cache.get(stage, unit.key, view)
                    result, pmap = hit if hit else (self._transient.get((stage, unit.key)), None)
                    if result is None:
                        continue
                    for found in result.diagnostics:
                        diag = self._noted(found, unit)
                        if diag is None:
                            continue
                        placed = anchored(remap(diag, pmap) if pmap is not None else diag, view, unit.index)
                        if placed not in shown:
                            groups.setdefault(placed, []).append(unit.index)
            for diag, indices in groups.items():
                out.append(self._unit_diagnostic(diag, sorted(set(indices)), view, loaded, enc))
        by_uri: dict[str, list[types.Diagnostic]] = {}
        for uri, diag in out:
            by_uri.setdefault(uri, []).append(diag)
        for diags in by_uri.values():
            diags.sort(key=lambda d: (d.range.start.line, d.range.start.character, d.severity or 0))
        return by_uri

    def _unit_diagnostic(
        self, diag: Diagnostic, indices: list[int], view: KernelView, loaded: Loaded, enc: str
    ) -> tuple[str, types.Diagnostic]:
        """Say which shape sets a diagnostic applies to when it is not all of them."""
        extra = {"kernel": view.name, "shapeSets": indices}  # for config quick fixes
        if len(view.units) == 1 or len(indices) == len(view.units):
            return to_lsp_diagnostic(diag, loaded.layout, enc, extra=extra)
        related: list[tuple[Range, str]] = []
        for i in indices:
            if i < len(view.shape_set_ranges):
                related.append((view.shape_set_place(i), f"shape set {i}: {view.shape_label(i)}"))
        which = ", ".join(str(i) for i in indices)
        label = (
            f"shape set {which}: {view.shape_label(indices[0])}"
            if len(indices) == 1
            else f"shape sets {which}"
        )
        return to_lsp_diagnostic(
            diag, loaded.layout, enc, message=f"{diag.message} [{label}]", related=related, extra=extra
        )


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
