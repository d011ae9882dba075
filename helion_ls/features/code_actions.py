"""Code actions: quick fixes for diagnostics, and applying tuned configs from the store.

Config problems are fixed in the decorator: a diagnostic whose data names a block size
(`block_index` + `suggested`) becomes an edit of the config the unit compiles with, through the same
decorator rewrite as Apply. Out-of-VMEM errors get fixes the compiler finds and a compile worker verifies
on an edited copy of the file (vmem_fixes.py), computed when code actions are asked for and remembered. Other compiler fixes travel in
`data.fix` (range already in client coordinates) and are offered as they are. In a kernel with stored
results the actions also offer the best config for one shape set (`config=`) and, with several shape
sets, all of them at once (`configs=[...]`, one per shape set); for a kernel whose configs vLLM reads from
`configs/<kernel>/` files, the actions run *Apply*, which writes its entries there (vllm_target.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from lsprotocol import types

from compiler.ir.config import Config

from ..rewrite.edits import EditError, TextEdit
from ..session.documents import file_path
from ..session.lru import LruCache
from . import vllm_target
from .config_edits import best_configs, config_edit, planned_edit, workspace_edit
from .host import Host

log = logging.getLogger(__name__)
FIX_BUDGET = 3.0  # seconds a worker may spend finding and verifying VMEM fixes for one diagnostic
FIX_WAIT = 15.0  # seconds a code action request waits for them (a busy pool queues the request)
_fixes_cache: LruCache[list[dict]] = LruCache(64)  # (text digest, kernel, shape sets, chip) -> fixes


def _config_change(data: dict, base: Config) -> tuple[str, Config] | None:
    """(title, new config) for a diagnostic whose data says how the config should change."""
    index, suggested = data.get("block_index"), data.get("suggested")
    if isinstance(index, int) and isinstance(suggested, int):
        blocks = list(base.get("block_sizes") or [])
        if 0 <= index < len(blocks):
            blocks[index] = suggested
            return f"Use block size {suggested} for block_sizes[{index}]", base.replace(block_sizes=blocks)
    return None


def config_fixes(ls: Host, uri: str, diagnostics: list[types.Diagnostic]) -> list[types.CodeAction]:
    state = ls.analyzer.state(uri)
    if state is None or state.loaded is None or state.loaded.text != state.text:
        return []
    loaded = state.loaded
    out = []
    for diag in diagnostics:
        data = diag.data if isinstance(diag.data, dict) else {}
        view = loaded.kernels.get(data.get("kernel", ""))
        sets = [i for i in data.get("shapeSets") or [] if isinstance(i, int)]
        if view is None or not sets or not 0 <= sets[0] < len(view.units):
            continue
        unit = view.units[sets[0]]
        base = unit.config
        if base is None:
            hit = ls.analyzer.cache.get("front", unit.key, view)
            base = hit[0].compiled.config if hit and hit[0].compiled is not None else None
        change = _config_change(data, base) if base is not None else None
        if change is None:
            continue
        title, config = change
        try:
            edit = config_edit(view, loaded.text, sets[0] if len(sets) == 1 else None, dict(config), None)
            change = workspace_edit(ls, loaded, edit)
        except EditError as exc:
            log.info("no config fix for %s: %s", view.name, exc)
            continue
        out.append(
            types.CodeAction(
                title=title,
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diag],
                is_preferred=True,
                edit=change,
            )
        )
    return out


async def vmem_fixes(ls: Host, uri: str, diagnostics: list[types.Diagnostic]) -> list[types.CodeAction]:
    """Verified fixes for out-of-VMEM errors, computed in a compile worker when asked for (and remembered)."""
    state = ls.analyzer.state(uri)
    if state is None or state.loaded is None or state.loaded.text != state.text:
        return []
    loaded = state.loaded
    out = []
    for diag in diagnostics:
        data = diag.data if isinstance(diag.data, dict) else {}
        view = loaded.kernels.get(data.get("kernel", ""))
        sets = tuple(i for i in data.get("shapeSets") or [] if isinstance(i, int))
        if diag.code != "HPL300" or not data.get("vmem_fixes") or view is None or not sets:
            continue
        chip = view.units[0].key.chip
        key = ("vmem_fixes", hashlib.sha256(loaded.text.encode()).hexdigest(), view.name, sets, chip)
        found = _fixes_cache.get(key)
        if found is None:
            request = {"kind": "vmem_fixes", "source": loaded.text, "file": view.units[0].key.file,
                       "where": file_path(loaded.uri),
                       "kernel": view.name, "shape_sets": list(sets), "chip": chip, "budget": FIX_BUDGET}
            try:
                answer = await asyncio.wait_for(ls.pool.run(key, request, lambda why: None), FIX_WAIT)
            except TimeoutError:
                log.info("quick fixes for %s: no answer within %.0f s", view.name, FIX_WAIT)
                continue
            if answer is None:
                continue
            found = answer["fixes"]
            log.info("%d verified VMEM fixes for %s in %.2f s", len(found), view.name, answer["seconds"])
            _fixes_cache.put(key, found)
        for fix in found:
            try:
                change = workspace_edit(ls, loaded, TextEdit(fix["start"], fix["end"], fix["new_text"]))
            except EditError as exc:
                log.info("no VMEM fix for %s: %s", view.name, exc)
                continue
            out.append(
                types.CodeAction(
                    title=fix["title"],
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diag],
                    is_preferred=not out,
                    edit=change,
                )
            )
    return out


def quick_fixes(uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> list[types.CodeAction]:
    """The compiler's own fixes, for diagnostics that carry no config change."""
    out = []
    for diag in diagnostics:
        data = diag.data if isinstance(diag.data, dict) else {}
        fix = data.get("fix")
        if not isinstance(fix, dict) or diag.source != "helion" or "block_index" in data:
            continue
        try:
            rng = types.Range(
                start=types.Position(**fix["range"]["start"]), end=types.Position(**fix["range"]["end"])
            )
            edit = types.TextEdit(range=rng, new_text=str(fix["newText"]))
        except (KeyError, TypeError):
            log.info("ignoring malformed fix in diagnostic data: %r", fix)
            continue
        doc = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
        out.append(
            types.CodeAction(
                title=str(fix.get("title") or "Apply the compiler's fix"),
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diag],
                is_preferred=True,
                edit=types.WorkspaceEdit(
                    document_changes=[types.TextDocumentEdit(text_document=doc, edits=[edit])]
                ),
            )
        )
    return out


async def config_actions(ls: Host, uri: str, position: types.Position) -> list[types.CodeAction]:
    state = ls.analyzer.state(uri)
    if state is None or state.loaded is None or state.loaded.text != state.text:
        return []
    loaded = state.loaded
    pos = loaded.layout.position(uri, position, ls.encoding())
    view = loaded.kernel_at(pos) if pos is not None else None
    if view is None or not any(u.args for u in view.units):
        return []
    best = await best_configs(ls, loaded, view)
    if vllm_target.target(loaded, view, view.units[0]) is not None:  # its configs live in vLLM's files
        return vllm_target.actions(loaded, view, best)
    out = []
    try:
        for unit, config in zip(view.units, best, strict=True):
            if config is None or config == unit.config:
                continue
            arg = {"shapeSet": unit.index, "config": config}  # the other shape sets keep theirs (apply_plan)
            edit, _ = await planned_edit(ls, loaded, view, arg)
            out.append(
                types.CodeAction(
                    title=f"Apply tuned config for shape set {unit.index}: {Config(config).short()}",
                    kind=types.CodeActionKind.RefactorRewrite,
                    edit=workspace_edit(ls, loaded, edit),
                )
            )
        if len(view.units) > 1 and all(c is not None for c in best):
            edit = config_edit(view, loaded.text, None, None, best)
            out.append(
                types.CodeAction(
                    title=f"Apply tuned configs for all {len(view.units)} shape sets (configs=[...])",
                    kind=types.CodeActionKind.RefactorRewrite,
                    edit=workspace_edit(ls, loaded, edit),
                )
            )
    except EditError as exc:
        log.info("no config actions for %s: %s", view.name, exc)
        return []
    return out


def register(ls: Host) -> None:
    @ls.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite]
        ),
    )
    async def code_action(ls: Host, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        state = ls.analyzer.state(uri)
        part = state.layout.part(uri) if state is not None else None
        if state is None or part is None:
            return []
        diagnostics = list(params.context.diagnostics)
        actions = config_fixes(ls, uri, diagnostics) + quick_fixes(uri, part.version, diagnostics)
        actions += await vmem_fixes(ls, uri, diagnostics)
        only = params.context.only
        if not only or any(k.startswith("refactor") for k in only):
            actions += await config_actions(ls, uri, params.range.start)
        return actions
