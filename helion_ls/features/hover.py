"""Hovers, answered only from cached compile results (never compiling on the event loop).

On the kernel's name or decorator: per shape set, the config in use, its estimated time (the model's, and
the TPU compiler's when the tuning store has it: read from the answers the lenses already fetched, never
from the store itself), the VMEM table with a bar against the scoped limit and the capacity, and the generated device kernel and pallas_call site (with a link
that opens the whole module). On a tensor access: its BlockSpec, where it lives and its VMEM bytes. On
`hl.tile` / `hl.grid`: extents, block sizes, steps and the loop strategy. On any other name, call or
subscript of the body: what the compiler found it to be (fact_hover.py). Each part comes from the compiled
kernel's plan and facts, so it describes exactly the generated code.
"""

from __future__ import annotations

import ast
import json
import urllib.parse
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from lsprotocol import types

from compiler import parse_python
from compiler.support.diagnostics import Position, Range
from compiler.tune.evidence import evidence
from compiler.tune.keys import TrialKey
from compiler.tune.model import estimate
from compiler.vmem.report import fmt_bytes as compiler_fmt_bytes

from ..session.documents import KernelView, Loaded
from . import fact_hover, vllm_target
from .chip_time_shown import chip_time_text
from .client_commands import SHOW_GENERATED
from .host import Host

BAR_CELLS = 24
CODE_LINES = 30  # per excerpt; the full module is one click away
NO_SHAPES = ("Not compiled yet: no `# helion: args(...)` line above the kernel and no call in this file with "
             "arguments known without running it. The hint's quick fix writes a shape line.")

WHERE = {  # label in the table -> what it means
    "vmem_block": ("VMEM block", "the BlockSpec pipeline copies one block into VMEM per grid step"),
    "resident": (
        "resident whole array",
        "the block spans the inner loop's whole extent; the loop slices it in VMEM",
    ),
    "hbm": ("HBM + pipeline", "left in HBM (`pl.ANY`); `pltpu.emit_pipeline` streams blocks into VMEM"),
    "smem": ("SMEM scalar table", "read one element at a time; the whole (small) array sits in SMEM"),
}


def fmt_bytes(n: float) -> str:
    return compiler_fmt_bytes(n, mib_digits=1)


def vmem_bar(total: int, limit: int, capacity: int) -> str:
    """`█` used, `▒` free below the scoped limit, `░` free up to the capacity; `✗` beyond the capacity."""
    scale = max(capacity, total, 1)
    used = min(BAR_CELLS, round(BAR_CELLS * total / scale))
    lim = min(BAR_CELLS, round(BAR_CELLS * limit / scale))
    cells = "".join("█" if i < used else ("▒" if i < lim else "░") for i in range(BAR_CELLS))
    return cells + (" ✗" if total > capacity else "")


def _shape(block: Iterable[int | str | None]) -> str:
    return "(" + ", ".join("–" if d is None else str(d) for d in block) + ")"


def _units_with_results(ls: Host, view: KernelView) -> list[tuple[int, Any, Any]]:
    """(unit index, compiled kernel, PositionMap basis->shown) for each unit with a cached compile."""
    out = []
    for unit in view.units:
        hit = ls.analyzer.cache.get("front", unit.key, view)
        if hit is not None and hit[0].compiled is not None:
            out.append((unit.index, hit[0].compiled, hit[1]))
    return out


def _set_title(view: KernelView, index: int) -> str:
    if not view.units[index].args:
        return "No shape set"
    origin = view.origin(index)
    title = f"Shape set {index}: `{view.shape_label(index)}`"
    if origin is None:
        return title
    notes = "".join(f" ({note})" for note in origin.notes)
    return f"{title} — {origin.label}{notes}"


# -- kernel hover ---------------------------------------------------------------------------------------
@lru_cache(maxsize=256)
def _excerpts(source: str, call_names: tuple[str, ...]) -> tuple[str, str]:
    """(device kernel functions, pallas_call statements) cut out of a generated module."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return "", ""
    lines = source.splitlines()
    kernels, calls = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in call_names:
            kernels.append(_cut(lines, node))
        if isinstance(node, ast.stmt) and not isinstance(node, ast.FunctionDef | ast.Module):
            seg = "\n".join(lines[node.lineno - 1 : node.end_lineno])
            if "pallas_call(" in seg and not any(seg in c for c in calls) and len(seg.splitlines()) < 60:
                calls.append(seg)
    return "\n\n".join(kernels), "\n\n".join(_trim(c) for c in calls)


def _cut(lines: list[str], node: ast.AST) -> str:
    return _trim("\n".join(lines[node.lineno - 1 : node.end_lineno]))


def _trim(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= CODE_LINES:
        return text
    return "\n".join([*lines[:CODE_LINES], f"# … {len(lines) - CODE_LINES} more lines"])


def _command_link(title: str, command: str, argument: dict) -> str:
    return f"[{title}](command:{command}?{urllib.parse.quote(json.dumps([argument]))})"


def _errors(ls: Host, loaded: Loaded, view: KernelView, index: int) -> str | None:
    """The unit's first compile error, with its line in the shown text or cell (None: it compiled cleanly)."""
    hit = ls.analyzer.cache.get("front", view.units[index].key, view)
    if hit is None:
        return None
    first = next((d for d in hit[0].diagnostics if d.is_error), None)
    if first is None:
        return None
    line = loaded.layout.locate(hit[1].forward_range(first.range).start.line)[1] + 1
    return f"**Does not compile** (line {line}): `{first.code}` {first.message}"


def _compile_failure(ls: Host, loaded: Loaded, view: KernelView, index: int) -> str:
    """Why a unit has no compiled kernel: its first error diagnostic, or that it is still compiling."""
    if ls.analyzer.cache.get("front", view.units[index].key, view) is None:
        return "_Compiling…_ (the hover shows the generated code once the kernel compiled)"
    return _errors(ls, loaded, view, index) or "**Does not compile** (see the diagnostics)."


def _vmem_table(vmem: Any) -> str:
    """One row per buffer. Numeric cells never sit side by side (a hover's table has no cell padding, so
    "2" next to "128.0 KiB" reads as one value): the buffer count is written "×2" after the block."""
    rows = ["| buffer | role | block × buffers | dtype | bytes |", "|---|---|---|---|--:|"]
    for r in vmem.rows:
        rows.append(
            f"| `{r.shown}` | {r.role} | {_shape(r.block_shape)} ×{r.buffer_count} | {r.dtype} | {fmt_bytes(r.bytes)} |"
        )
    return "\n".join(rows)


def _us(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} µs"


def time_line(ls: Host, loaded: Loaded, view: KernelView, index: int, ck: Any) -> str:
    """The model's estimate of the config in use and, when known, the TPU compiler's estimate and the time
    measured on the chip, each labelled with what it is (tune/evidence.py); on a machine without the chip, why
    these are estimates (chip_time_shown.py)."""
    est = estimate(ck.plan, ck.chip)
    launch = est.breakdown.get("launch", 0.0)
    line = (
        f"Time on {ck.chip.name}: {evidence('model', ck.chip.name)} **{_us(est.seconds - launch)}** on the "
        f"device (+ {_us(launch)} per-call dispatch; {est.bound}-bound)"
    )
    unit = view.units[index]
    key = TrialKey(unit.key.source_hash, unit.key.shape_key, unit.key.chip)
    current = unit.config if unit.config is not None else ck.config
    summary = ls.store_for(ls.settings.for_uri(loaded.uri)).cached((key, current))
    trial = summary.compiler_current if summary is not None else None
    if trial is not None and trial.seconds:
        how = trial.metrics.get("method", "")
        how = "libtpu's simulated cycles" if how == "simulated" else "bundles issued: a compute-issue lower bound"
        line += f" · TPU compiler estimate **{_us(trial.seconds)}** ({how})"
    measured = summary.current if summary is not None else None
    tuned = None
    if measured is not None and measured.evaluator == "tpu" and measured.seconds:
        tuned = f"{evidence('tpu', ck.chip.name)} **{_us(measured.seconds)}** per call"
        spread, runs = measured.metrics.get("spread"), measured.metrics.get("repeats")
        if isinstance(spread, int | float) and isinstance(runs, int):
            tuned += f" (best of {runs} runs, slowest loop {100 * spread:.1f} % over)"
    return f"{line} {chip_time_text(ls, loaded.uri, view.name, unit, current, ck.chip.name, tuned)}"


def kernel_markdown(ls: Host, loaded: Loaded, view: KernelView) -> str:
    """Per shape set: the config, the device kernel's code first (what the hover is for), then VMEM use and
    the pallas_call site, so code shows without scrolling past tables."""
    chip = view.units[0].key.chip
    parts = [f"**{view.name}** — Helion kernel → Pallas on **{chip}**"]
    declared = getattr(view.kernel, "declaration_text", None)
    if declared:
        parts.append(declared[0].upper() + declared[1:] + ".")
    results = {i: ck for i, ck, _ in _units_with_results(ls, view)}
    for unit in view.units:
        parts.append(f"#### {_set_title(view, unit.index)}")
        if not unit.args:  # nothing wrong with the kernel: it only lacks shapes (the HPL107 hint)
            parts.append(NO_SHAPES)
            continue
        ck = results.get(unit.index)
        if ck is None:
            parts.append(_compile_failure(ls, loaded, view, unit.index))
            continue
        errors = _errors(ls, loaded, view, unit.index)
        if errors:
            parts.append(errors)
        origin = unit.config_source or ("from the decorator" if unit.config is not None else "default")
        parts.append(f"Config ({origin}): `{ck.config!r}`")
        vllm = vllm_target.target(loaded, view, unit)
        if vllm is not None:
            parts.append(vllm_target.hover_line(vllm))
        parts.append(time_line(ls, loaded, view, unit.index, ck))
        narrowed = ck.plan.narrowed_note()
        if narrowed:
            parts.append(narrowed)
        kernels, calls = _excerpts(ck.source, tuple(c.name for c in ck.plan.calls))
        if kernels:
            parts.append(f"Device kernel:\n```python\n{kernels}\n```")
        vmem = ck.vmem
        bar = vmem_bar(vmem.total_bytes, vmem.limit_bytes, vmem.capacity_bytes)
        parts.append(
            f"VMEM `{bar}` **{fmt_bytes(vmem.total_bytes)}** of {fmt_bytes(vmem.limit_bytes)} requested limit "
            f"(default {fmt_bytes(vmem.default_limit_bytes)}, capacity {fmt_bytes(vmem.capacity_bytes)}) — "
            f"**{vmem.verdict.replace('_', ' ')}**"
        )
        parts.append(_vmem_table(vmem))
        if calls:
            parts.append(f"`pallas_call` site:\n```python\n{calls}\n```")
        link = {"uri": loaded.uri, "kernel": view.name, "shapeSet": unit.index}
        parts.append(_command_link("Open the full generated module", SHOW_GENERATED, link))
    return "\n\n".join(parts)


# -- access and loop hovers ----------------------------------------------------------------------------
def _smallest(items: list[tuple[Range, Any]]) -> tuple[Range, Any] | None:
    def size(r: Range) -> tuple[int, int]:
        return (r.end.line - r.start.line, r.end.character - r.start.character)

    return min(items, key=lambda it: size(it[0]), default=None)


def _operand(ck: Any, access: Any) -> tuple[Any, Any] | None:
    for call in ck.plan.calls:
        if access.call and call.name != access.call:
            continue
        for op in call.operands:
            if op.name == access.operand:
                return call, op
    return None


def _row_bytes(ck: Any, call: Any, op: Any) -> int | None:
    """The VMEM table's figure for this operand: its own row, not another buffer of the same tensor."""
    for row in ck.vmem.rows:
        if row.call == call.name and row.operand == op.name:
            return row.bytes
    return None


def access_markdown(view: KernelView, hits: list[tuple[int, Any, Any]]) -> str:
    first = hits[0][2]
    kind = "store to" if first.is_store else "load of"
    parts = [f"**{first.tensor}** — {kind} a tensor block"]
    table = ["| shape set | block shape × buffers | index map | lives in | VMEM |", "|---|---|---|---|--:|"]
    notes: dict[str, None] = {}
    for index, ck, access in hits:
        found = _operand(ck, access)
        if found is None:
            continue
        call, op = found
        nbytes = _row_bytes(ck, call, op)
        label = str(index) if view.units[index].args else "–"
        where, meaning = WHERE[op.memory]
        table.append(
            f"| {label} | {_shape(op.block_shape)} of {_shape(op.array_shape)} ×{op.buffer_count} | `{op.index_map}` "
            f"| {where} | {fmt_bytes(nbytes) if nbytes is not None else '?'} |"
        )
        notes[f"- **{where}**: {meaning}"] = None
    parts.append("\n".join(table))
    parts.append("\n".join(notes))
    indexing = sorted({access.indexing for _, _, access in hits if access.indexing})
    if indexing:
        parts.append("\n".join(f"- {text}" for text in indexing))
    return "\n\n".join(parts)


def loop_markdown(view: KernelView, hits: list[tuple[int, Any, Any]]) -> str:
    first = hits[0][2]
    what = "launch grid (outermost loop)" if first.kind == "grid" else "inner device loop"
    parts = [f"**hl.{first.api}** — {what}"]
    table = ["| shape set | extents | block sizes | steps | strategy |", "|---|---|---|---|---|"]
    for index, _ck, loop in hits:
        blocks = ", ".join(
            f"{b}" + (f" (block_sizes[{i}])" if i is not None else "")
            for b, i in zip(loop.block_sizes, loop.block_size_indices, strict=False)
        )
        label = str(index) if view.units[index].args else "–"
        strategy = "grid (BlockSpec pipeline)" if loop.strategy == "grid" else f"`{loop.strategy}`"
        extents, steps = _shape(loop.extents), _shape(loop.steps)
        if any(loop.device_bounds):
            extents = _shape(["on device" if dyn else e for e, dyn in zip(loop.extents, loop.device_bounds, strict=True)])
            steps = _shape(["on device" if dyn else s for s, dyn in zip(loop.steps, loop.device_bounds, strict=True)])
        table.append(f"| {label} | {extents} | {blocks} | {steps} | {strategy} |")
    parts.append("\n".join(table))
    device = {loop.note: None for _, _ck, loop in hits if loop.note}
    if device:
        parts.append("\n".join(f"- {note}" for note in device))
    tails = {note: None for _, _ck, loop in hits for note in loop.tail_notes()}
    if tails:
        parts.append("\n".join(f"- {note} (the last block is partial: loads past the end are masked out of "
                                "reductions and dots, stores past it are dropped)" for note in tails))
    if first.kind == "inner":
        parts.append(
            "Strategies: `emit_pipeline` streams blocks from HBM (VMEM independent of the extent), `unroll` keeps "
            "the whole extent resident in VMEM, `fori_loop` slices a resident block in a `lax.fori_loop`. "
            "Set `pallas_loop_type` in the config."
        )
    return "\n\n".join(parts)


def _find(ls: Host, view: KernelView, pos: Position, attr: str) -> tuple[Range, list] | None:
    """Plan entries (accesses or loops) under `pos` for each compiled unit; range in shown coordinates."""
    hits: list[tuple[int, Any, Any]] = []
    shown_range: Range | None = None
    for index, ck, pmap in _units_with_results(ls, view):
        basis_pos = pmap.backward(pos)
        found = _smallest(
            [(item.range, item) for item in getattr(ck.plan, attr) if item.range.contains(basis_pos)]
        )
        if found is not None:
            hits.append((index, ck, found[1]))
            shown_range = shown_range or pmap.forward_range(found[0])
    return (shown_range, hits) if hits and shown_range is not None else None


def hover_at(ls: Host, loaded: Loaded, pos: Position) -> tuple[str, Range] | None:
    view = loaded.kernel_at(pos)
    if view is None:
        return None
    if view.name_range.contains(pos) or view.decorator_range.contains(pos):
        where = view.name_range if view.name_range.contains(pos) else view.decorator_range
        return kernel_markdown(ls, loaded, view), where
    access = _find(ls, view, pos, "accesses")
    units = _units_with_results(ls, view)
    fact = fact_hover.find(units, pos)
    if fact_hover.prefer_fact(fact, access):
        return fact_hover.fact_markdown(view, fact[1]), fact[0]
    if access is not None:
        return access_markdown(view, access[1]), access[0]
    loop = _find(ls, view, pos, "loops")
    if loop is not None:
        return loop_markdown(view, loop[1]), loop[0]
    if units:
        return fact_hover.not_evaluated(view, units, pos)
    return _not_compiled(ls, loaded, view, pos)


def _not_compiled(ls: Host, loaded: Loaded, view: KernelView, pos: Position) -> tuple[str, Range] | None:
    """A token of a kernel no shape set of which has compiled: why (still compiling, its first error, or no
    shapes), rather than no answer."""
    found = fact_hover.token_at(view, pos)
    if found is None:
        return None
    text, rng = found
    unit = next((u for u in view.units if u.args), None)
    why = NO_SHAPES if unit is None else _compile_failure(ls, loaded, view, unit.index)
    return f"**`{text}`** — {why}", rng


def register(ls: Host) -> None:
    @ls.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: Host, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        state = ls.analyzer.state(uri)
        if state is None or state.loaded is None:
            return None
        loaded = state.loaded
        enc = ls.encoding()
        pos = loaded.layout.position(uri, params.position, enc)
        found = hover_at(ls, loaded, pos) if pos is not None else None
        if found is None:
            return None
        text, rng = found
        shown_in, shown = loaded.layout.range(rng, enc)
        return types.Hover(
            contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text),
            range=shown if shown_in == uri else None,
        )
