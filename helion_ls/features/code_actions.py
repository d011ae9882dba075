"""Code actions: the compiler's quick fixes, and applying tuned configs from the store.

A diagnostic with a fix carries it in `data.fix` (range already in client coordinates), so a quick fix
needs nothing but the diagnostic the client sends back. In a kernel with stored results the actions also
offer the best config for one shape set (`config=`) and, with several shape sets, all of them at once
(`configs=[...]`, one per shape set).
"""

from __future__ import annotations

import logging

from lsprotocol import types

from compiler.config import Config

from ..edits import EditError
from ..lsp import from_lsp_position
from ..server import HelionServer
from .commands import best_configs, config_edit, workspace_edit

log = logging.getLogger(__name__)


def quick_fixes(uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> list[types.CodeAction]:
    out = []
    for diag in diagnostics:
        fix = diag.data.get("fix") if isinstance(diag.data, dict) else None
        if not isinstance(fix, dict) or diag.source != "helion":
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


async def config_actions(ls: HelionServer, uri: str, position: types.Position) -> list[types.CodeAction]:
    state = ls.analyzer.docs.get(uri)
    if state is None or state.loaded is None or state.loaded.text != state.text:
        return []
    loaded = state.loaded
    view = loaded.kernel_at(from_lsp_position(position, loaded.lines, ls.encoding()))
    if view is None or not any(u.args for u in view.units):
        return []
    best = await best_configs(ls, loaded, view)
    out = []
    try:
        for unit, config in zip(view.units, best, strict=True):
            if config is None or config == unit.config:
                continue
            edit = config_edit(view, loaded.text, unit.index, config, None)
            out.append(
                types.CodeAction(
                    title=f"Apply tuned config for shape set {unit.index}: {Config(config).short()}",
                    kind=types.CodeActionKind.RefactorRewrite,
                    edit=workspace_edit(ls, uri, loaded.version, loaded.text, edit),
                )
            )
        if len(view.units) > 1 and all(c is not None for c in best):
            edit = config_edit(view, loaded.text, None, None, best)
            out.append(
                types.CodeAction(
                    title=f"Apply tuned configs for all {len(view.units)} shape sets (configs=[...])",
                    kind=types.CodeActionKind.RefactorRewrite,
                    edit=workspace_edit(ls, uri, loaded.version, loaded.text, edit),
                )
            )
    except EditError as exc:
        log.info("no config actions for %s: %s", view.name, exc)
        return []
    return out


def register(ls: HelionServer) -> None:
    @ls.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.RefactorRewrite]
        ),
    )
    async def code_action(ls: HelionServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        state = ls.analyzer.docs.get(uri)
        if state is None:
            return []
        actions = quick_fixes(uri, state.version, list(params.context.diagnostics))
        only = params.context.only
        if not only or any(k.startswith("refactor") for k in only):
            actions += await config_actions(ls, uri, params.range.start)
        return actions
