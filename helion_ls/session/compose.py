"""What a document's published diagnostics are: the parse's findings plus, per kernel, every stage's
result for each of its units, carried to the shown text and labelled with the shape sets they hold for,
by the client document showing them (the file, or a notebook's cell: the document's `Layout`).

Plain LSP JSON (lsp_json.py), so the same composition serves the running server and the start-up path
that publishes remembered results before the server's imports are done (early.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compiler.results import STAGES
from compiler.support.diagnostics import Diagnostic, Range

from ..wire.lsp_json import diagnostic_json
from .documents import KernelView, Loaded, StageResult, Unit, anchored, remap
from .positions import PositionMap

# (stage, view, unit) -> the unit's result for the stage and the map from its basis to the view's text
# (None: already in the view's coordinates), or None when there is none
Lookup = Callable[[str, KernelView, Unit], tuple[StageResult, PositionMap | None] | None]
# (diagnostic, unit) -> the diagnostic as shown (a tuned config's note added), or None to leave it out
Note = Callable[[Diagnostic, Unit], Diagnostic | None]


def compose(loaded: Loaded, lookup: Lookup, encoding: str, note: Note | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every stage's diagnostics for the units of `loaded`, by client document, each list sorted by position."""
    out = [diagnostic_json(d, loaded.layout, encoding) for d in loaded.diagnostics]
    shown = set(loaded.diagnostics)  # a kernel whose only shape line is bad: that line's error, once
    for view in loaded.kernels.values():
        groups: dict[Diagnostic, list[int]] = {}
        for unit in view.units:
            for stage in STAGES:
                hit = lookup(stage, view, unit)
                if hit is None:
                    continue
                result, pmap = hit
                for found in result.diagnostics:
                    diag = note(found, unit) if note is not None else found
                    if diag is None:
                        continue
                    placed = anchored(remap(diag, pmap) if pmap is not None else diag, view, unit.index)
                    if placed not in shown:
                        groups.setdefault(placed, []).append(unit.index)
        for diag, indices in groups.items():
            out.append(_unit_diagnostic(diag, sorted(set(indices)), view, loaded, encoding))
    by_uri: dict[str, list[dict[str, Any]]] = {}
    for uri, diag in out:
        by_uri.setdefault(uri, []).append(diag)
    for diags in by_uri.values():
        diags.sort(key=lambda d: (d["range"]["start"]["line"], d["range"]["start"]["character"], d["severity"]))
    return by_uri


def needs_check(stage: str, lookup: Lookup, view: KernelView, unit: Unit, ahead: bool = False) -> bool:
    """The unit compiled, has no result for `stage` ("lower" or "tpu") yet, and (for libtpu) lowered
    without errors. `ahead`: asked before the lowering ran, so a missing lowering counts as "will need"."""
    front = lookup("front", view, unit)
    if front is None or front[0].compiled is None or lookup(stage, view, unit) is not None:
        return False
    if stage == "tpu":
        lower = lookup("lower", view, unit)
        if lower is None:
            return ahead
        return not any(d.is_error for d in lower[0].diagnostics)
    return True


def _unit_diagnostic(
    diag: Diagnostic, indices: list[int], view: KernelView, loaded: Loaded, enc: str
) -> tuple[str, dict[str, Any]]:
    """Say which shape sets a diagnostic applies to when it is not all of them."""
    extra = {"kernel": view.name, "shapeSets": indices}  # for config quick fixes
    if len(view.units) == 1 or len(indices) == len(view.units):
        return diagnostic_json(diag, loaded.layout, enc, extra=extra)
    related: list[tuple[Range, str]] = []
    for i in indices:
        if i < len(view.shape_set_ranges):
            related.append((view.shape_set_place(i), f"shape set {i}: {view.shape_label(i)}"))
    which = ", ".join(str(i) for i in indices)
    label = f"shape set {which}: {view.shape_label(indices[0])}" if len(indices) == 1 else f"shape sets {which}"
    return diagnostic_json(diag, loaded.layout, enc, message=f"{diag.message} [{label}]",
                           related=related, extra=extra)
