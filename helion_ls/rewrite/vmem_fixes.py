"""Quick fixes for out-of-VMEM errors (HPL300), verified before they are offered. Runs in a compile worker
when the editor asks for code actions, never on the compiles that follow typing.

The compiler proposes configs that fit (`compiler.vmem.fixes`). Each is written into the source exactly as
the quick fix will write it (`edits.set_config`, or `set_configs` with one config per shape set when a
shared config cannot serve them all), the edited text is parsed and every shape set of the kernel compiled
again. A fix is offered only when the diagnostic is gone from every shape set it was reported on and no
shape set has an error or warning it did not have before. The search and the checks share a time budget.
  request: {"kind": "vmem_fixes", "source", "file", "kernel", "shape_sets": [int], "chip", "budget": seconds}
  answer:  {"fixes": [{"title", "start", "end", "new_text", "kind", "total_bytes"}], "seconds"}
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import compiler
from compiler.support.diagnostics import Severity
from compiler.vmem.fixes import VmemFix, vmem_fixes
from compiler.vmem.report import fmt_bytes

from .edits import EditError, TextEdit, apply_edit, config_assignments, set_config, set_configs

SEARCH_SHARE = 0.6  # of the budget, for the compiler's search; the rest verifies


def _problems(kernel: Any, index: int, chip: str) -> tuple[frozenset[str], Any]:
    """Codes of the errors and warnings of one shape set as the decorator compiles it, and its config."""
    try:
        ck = kernel.compile(shape_set=index if kernel.shape_sets else None, chip=chip)
    except compiler.CompileError as exc:
        return frozenset(d.code for d in exc.diagnostics if d.severity <= Severity.WARNING), None
    return frozenset(d.code for d in ck.diagnostics if d.severity <= Severity.WARNING), ck.config


def verified_fixes(load: Callable[..., Any], req: dict[str, Any]) -> dict[str, Any]:
    start = time.monotonic()
    deadline = start + float(req.get("budget", 3.0))
    source, name, chip, file = req["source"], req["kernel"], req["chip"], req.get("file")
    where = req.get("where")
    kernel = load(source, file, None, where).kernels.get(name)
    sets = [i for i in req.get("shape_sets") or [0] if isinstance(i, int)]
    if kernel is None or not sets:
        return {"fixes": [], "seconds": time.monotonic() - start}
    count = max(1, len(kernel.shape_sets))
    before = [_problems(kernel, i, chip) for i in range(count)]
    target = sets[0]
    args = kernel.shape_sets[target] if kernel.shape_sets else None
    search_end = start + (deadline - start) * SEARCH_SHARE
    found = vmem_fixes(kernel, args, kernel.config_for(target), chip, search_end)
    out = []
    for fix in found:
        for edit, scope in _edits(source, name, kernel, fix, sets, before):
            if time.monotonic() > deadline:
                break
            if _removes_the_error(apply_edit(source, edit), file, name, sets, before, chip, where):
                title = f"Set {config_assignments(source, name, fix.changes)}{scope} — needs " \
                        f"{fmt_bytes(fix.total_bytes)} of VMEM ({chip} estimate)"
                out.append({"title": title, "start": edit.start, "end": edit.end, "new_text": edit.new_text,
                            "kind": fix.kind, "total_bytes": fix.total_bytes})
                break
    return {"fixes": out, "seconds": time.monotonic() - start}


def _edits(source: str, name: str, kernel: Any, fix: VmemFix, sets: list[int], before: list) -> list[tuple[TextEdit, str]]:
    """The edit that sets the fix where the unit's config is written, then (several shape sets sharing one
    config) the per-shape-set `configs=[...]` that changes only the reported shape sets."""
    several = len(kernel.shape_sets) > 1
    out = []
    try:
        out.append((set_config(source, name, dict(fix.config), index=sets[0] if several else None), ""))
        per_set = kernel.decorator_configs and len(kernel.decorator_configs) == len(kernel.shape_sets)
        if several and not per_set:
            configs = []
            for i in range(len(kernel.shape_sets)):
                own = kernel.config_for(i) or before[i][1]
                if i not in sets and own is None:
                    return out
                configs.append(dict(fix.config) if i in sets else dict(own))
            which = ", ".join(str(i) for i in sets)
            out.append((set_configs(source, name, configs), f" for shape set{'s' if len(sets) > 1 else ''} {which}"))
    except EditError:
        pass
    return out


def _removes_the_error(text: str, file: str | None, name: str, sets: list[int], before: list, chip: str,
                       where: str | None = None) -> bool:
    kernel = compiler.load(text, file, where=where).kernels.get(name)
    if kernel is None:
        return False
    for i, (was, _) in enumerate(before):
        now, _ = _problems(kernel, i, chip)
        if (i in sets and "HPL300" in now) or not now <= was:
            return False
    return True
