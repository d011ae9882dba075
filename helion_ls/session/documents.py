"""What the server knows about each open document: its kernels at a version, and the compile cache.

`load_document` (run off the event loop) turns one text version into a `Loaded`: the module's file-level
diagnostics and a `KernelView` per kernel (for kernels without a shape line, once a compile worker found
the shapes the file's calls give them; a notebook's module is its code cells, and its `Layout` says which
cell shows each line: layout.py), with the units it compiles (one per shape set, or one without
arguments when it has none) and their keys (`compiler.results.UnitKey`). Results live in `ResultCache`,
keyed by (normalised source hash, shape set, config, chip, file name) — not by document or version — so an
unchanged kernel is never recompiled, whichever document or version asks; each result remembers the
kernel text it was computed on (`basis`) and `PositionMap`s carry its ranges to the text being shown.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any

from pygls.uris import to_fs_path

import compiler
from compiler.frontend.notebook import NotebookModule
from compiler.ir.specs import format_args
from compiler.results import STAGES, CompiledSnapshot, Unit, UnitKey, kernel_units
from compiler.support.diagnostics import Diagnostic, Fix, Position, Range, Related, error

from ..wire.layout import Layout
from .lru import LruCache
from .positions import KernelSource, PositionMap

HELION_HINT = re.compile(r"\bhelion\b")  # a file that never says "helion" has no kernels: skip it for free


@dataclass
class KernelView:
    name: str
    kernel: Any  # compiler.Kernel
    source: KernelSource
    name_range: Range
    decorator_range: Range
    shape_set_ranges: list[Range]  # a shape line, or the decorator for a shape set found in the file's calls
    units: list[Unit]
    shape_set_origins: list[Any] = field(default_factory=list)  # compiler ShapeOrigin (or None for a shape line)

    @property
    def source_hash(self) -> str:
        return self.units[0].key.source_hash

    def shape_label(self, index: int) -> str:
        unit = self.units[index]
        return format_args(unit.args) if unit.args else "no shape set"

    def origin(self, index: int) -> Any:
        """Where an inferred shape set comes from (`label`, `range` of the call), None for a shape line."""
        return self.shape_set_origins[index] if index < len(self.shape_set_origins) else None

    def shape_set_place(self, index: int) -> Range:
        """Where a shape set is written: its shape line, or the call it was found in."""
        origin = self.origin(index)
        return origin.range if origin is not None else self.shape_set_ranges[index]


@dataclass
class Loaded:
    """One version of one document, parsed (no compile yet). Positions are the module's; `layout` carries
    them to the client's documents (the file, or a notebook's cells)."""

    uri: str
    version: int | None
    text: str
    lines: list[str]
    diagnostics: list[Diagnostic]
    kernels: dict[str, KernelView]
    layout: Layout
    notebook: NotebookModule | None = None  # a notebook's module (its cells' places name generated lines)
    needs_call_shapes: bool = False  # kernels without a shape line wait for the shapes from the file's calls

    def kernel_at(self, pos: Position) -> KernelView | None:
        for view in self.kernels.values():
            first = Position(view.source.first_line, 0)
            if first <= pos <= view.kernel.range.end or (
                view.shape_set_ranges and view.shape_set_ranges[0].start <= pos <= view.kernel.range.end
            ):
                return view
        return None


@dataclass(frozen=True)
class StageResult:
    """Diagnostics of one stage for one unit, in the coordinates of `basis`."""

    key: UnitKey
    basis: KernelSource
    diagnostics: tuple[Diagnostic, ...]
    # front stage only; None when the unit does not compile. Plain results (no IR, no AST), so hundreds of
    # cached units stay cheap for the garbage collector, whose full passes stop the event loop
    compiled: CompiledSnapshot | None = None
    seconds: float = 0.0

    @property
    def untunable(self) -> bool:
        """No config can mend this unit: it does not compile, or its arrays do not fit the chip's HBM (HPL303).
        Its lens offers no Tune."""
        return self.compiled is None or any(d.code == "HPL303" for d in self.diagnostics)


@dataclass
class ResultCache:
    """Results of every stage by UnitKey, plus position maps from their basis to shown texts."""

    size: int = 1024  # units per stage: a file of 200 kernels with two shape sets each fits
    stages: dict[str, LruCache[StageResult]] = field(default_factory=dict)
    _maps: LruCache[PositionMap | bool] = field(default_factory=lambda: LruCache(2048))

    def __post_init__(self) -> None:
        self.stages = {stage: LruCache(self.size) for stage in STAGES}

    def get(self, stage: str, key: UnitKey, view: KernelView) -> tuple[StageResult, PositionMap] | None:
        """The cached result for `key`, if its ranges can be carried to `view`'s text."""
        result = self.stages[stage].get(key)
        if result is None:
            return None
        pmap = self.map(result.basis, view.source)
        return None if pmap is None else (result, pmap)

    def put(self, stage: str, result: StageResult) -> None:
        self.stages[stage].put(result.key, result)

    def map(self, basis: KernelSource, shown: KernelSource) -> PositionMap | None:
        """Memoised `PositionMap.between` (False marks kernels that cannot be mapped)."""
        key = (basis, shown)
        found = self._maps.get(key)
        if found is None:
            found = PositionMap.between(basis, shown) or False
            self._maps.put(key, found)
        return found or None


def remap(diag: Diagnostic, pmap: PositionMap) -> Diagnostic:
    if pmap.is_identity:
        return diag
    fix = diag.fix
    return Diagnostic(
        diag.severity,
        pmap.forward_range(diag.range),
        diag.code,
        diag.message,
        tuple(Related(pmap.forward_range(r.range), r.message) for r in diag.related),
        Fix(fix.title, pmap.forward_range(fix.range), fix.new_text) if fix else None,
        diag.data,
    )


def anchored(diag: Diagnostic, view: KernelView, index: int) -> Diagnostic:
    """A diagnostic the compiler anchored to the unit's config entry or shape line, placed on that entry or
    line in the shown text (the cached result may come from a text where they sat elsewhere)."""
    anchor = diag.data.get("anchor") if diag.data else None
    if anchor == "config":
        rng = view.kernel.config_range(index if view.units[index].args else None)
    elif anchor == "shape_set" and index < len(view.shape_set_ranges):
        line = view.shape_set_ranges[index].start.line
        rng = Range(Position(line, diag.range.start.character), Position(line, diag.range.end.character))
    else:
        return diag
    return diag if rng is None or rng == diag.range else dataclasses.replace(diag, range=rng)


def _name_range(node: ast.FunctionDef, lines: list[str]) -> Range:
    line = node.lineno - 1
    text = lines[line] if line < len(lines) else ""
    match = re.search(rf"\bdef\s+({re.escape(node.name)})\b", text)
    col = len(text[: match.start(1)].encode()) if match else node.col_offset
    return Range(Position(line, col), Position(line, col + len(node.name.encode())))


def file_path(uri: str) -> str | None:
    """The document's file on disk (None for an untitled buffer): the compiler looks up the kernel wrappers its
    project names or its workspace defines from there (compiler/frontend/kernel_forms.py)."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return path or None


def file_name(uri: str) -> str:
    """The name generated code gives the document (its file name; an untitled buffer keeps its URI's tail)."""
    path = to_fs_path(uri) or uri
    return os.path.basename(path.rstrip("/")) or path


def _kernel_view(kernel: Any, node: ast.FunctionDef, lines: list[str], chip: str, file: str,
                 path: str | None = None) -> KernelView:
    units = kernel_units(kernel, chip, file, path)
    return KernelView(
        name=kernel.name,
        kernel=kernel,
        source=KernelSource.of(node, lines),
        name_range=_name_range(node, lines),
        decorator_range=kernel.decorator_range,
        shape_set_ranges=list(kernel.shape_set_ranges),
        units=units,
        shape_set_origins=list(kernel.shape_set_origins),
    )


def load_document(
    uri: str, version: int | None, text: str, chip: str, call_shapes: Any = None,
    notebook: NotebookModule | None = None, mentions_helion: bool | None = None,
) -> Loaded:
    """Parse one version (blocking: call off the event loop). Never raises. `notebook`: the module `text`
    was built from, for a notebook (its cells' syntax errors are among the diagnostics); `mentions_helion`:
    whether its cells say "helion" (a cell left out of `text` for its syntax error may be the one).

    A file with kernels without a shape line needs the shapes its own calls give them, which takes torch
    (a compile worker finds them): without `call_shapes` it comes back `needs_call_shapes`, with no kernels
    yet; load it again with them."""
    lines = text.splitlines(keepends=True)
    layout = Layout.file(uri, version, text)
    if not (mentions_helion if mentions_helion is not None else HELION_HINT.search(text)):
        return Loaded(uri, version, text, lines, [], {}, layout)
    try:
        module = compiler.load(notebook or text, file_name(uri), call_shapes, where=file_path(uri))
        if call_shapes is None and module.needs_call_shapes:
            return Loaded(uri, version, text, lines, [], {}, layout, notebook, needs_call_shapes=True)
    except Exception as exc:  # the compiler promises not to raise; if it does, say so once
        diag = error(
            "HPL900",
            f"internal compiler error while loading: {type(exc).__name__}: {exc}",
            _first_line(lines),
        )
        return Loaded(uri, version, text, lines, [diag], {}, layout)
    diagnostics = list(module.diagnostics)
    kernels: dict[str, KernelView] = {}
    path = to_fs_path(uri) if notebook is None else None  # a file's place on disk: its vLLM configs, if any
    path = path if path and os.path.isabs(path) else None
    if module.kernels:
        nodes = _function_nodes(module.info.tree)
        for name, kernel in module.kernels.items():
            node = nodes.get((name, kernel.range.start.line)) or nodes.get((name, None))
            if node is None:
                continue
            try:
                kernels[name] = _kernel_view(kernel, node, lines, chip, file_name(uri), path)
            except Exception as exc:
                diagnostics.append(
                    error(
                        "HPL900",
                        f"internal compiler error: {type(exc).__name__}: {exc}",
                        kernel.decorator_range,
                    )
                )
    return Loaded(uri, version, text, lines, diagnostics, kernels, layout, notebook)


def _function_nodes(tree: ast.Module | None) -> dict[tuple[str, int | None], ast.FunctionDef]:
    """The file's functions (from the compiler's parse of it) by name and first line."""
    if tree is None:
        return {}
    out: dict[tuple[str, int | None], ast.FunctionDef] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            out[(node.name, first)] = node
            out[(node.name, node.lineno - 1)] = node
            out.setdefault((node.name, None), node)
    return out


def _first_line(lines: list[str]) -> Range:
    return Range(Position(0, 0), Position(0, len(lines[0].rstrip("\r\n").encode()) if lines else 0))
