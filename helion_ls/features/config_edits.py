"""The edits that write configs into a kernel's decorator (edits.py rewrites the text), as the client applies
them: for an apply request or a code action, with one config per shape set where one config for all would
undo another shape set's (apply_plan.py), mapped onto the client document that shows the text."""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from ..rewrite.edits import EditError, TextEdit, set_config, set_configs
from ..session.documents import KernelView, Loaded
from . import apply_plan
from .host import Host


def workspace_edit(ls: Host, loaded: Loaded, edit: TextEdit) -> types.WorkspaceEdit:
    """The edit of `loaded`'s module text, on the client document that shows it (a notebook's cell) at the
    version it had in `loaded`."""
    try:
        part, rng = loaded.layout.edit_range(loaded.text, edit.start, edit.end, ls.encoding())
    except ValueError as exc:
        raise EditError(str(exc)) from None
    uri, version = part.uri, part.version
    text_edit = types.TextEdit(range=rng, new_text=edit.new_text)
    caps = ls.client_capabilities.workspace
    if caps is not None and caps.workspace_edit is not None and caps.workspace_edit.document_changes:
        doc = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
        return types.WorkspaceEdit(
            document_changes=[types.TextDocumentEdit(text_document=doc, edits=[text_edit])]
        )
    return types.WorkspaceEdit(changes={uri: [text_edit]})


async def best_configs(ls: Host, loaded: Loaded, view: KernelView) -> list[dict | None]:
    """The store's best config per shape set (None where nothing is stored)."""
    found = await apply_plan.stored_bests(ls, loaded, view)
    return [s.best.config if s is not None else None for s in found]


def config_edit(
    view: KernelView, text: str, shape_set: int | None, config: dict | None, configs: list[dict] | None
) -> TextEdit:
    if configs is not None:
        return set_configs(text, view.name, configs)
    if config is None:
        raise JsonRpcInvalidParams("missing config")
    several = len(view.units) > 1
    return set_config(text, view.name, config, index=shape_set if several else None)


async def planned_edit(
    ls: Host, loaded: Loaded, view: KernelView, arg: dict[str, Any]
) -> tuple[TextEdit, str]:
    """The decorator edit for an apply request, and what it does (for the user)."""
    text, shape_set, config, configs = loaded.text, arg.get("shapeSet"), arg.get("config"), arg.get("configs")
    if configs is not None:
        return set_configs(text, view.name, configs), f"one config per shape set to {view.name}"
    if config is None:
        raise JsonRpcInvalidParams("missing config")
    if len(view.units) < 2:
        return set_config(text, view.name, config), f"the tuned config to {view.name}"
    bests = await apply_plan.stored_bests(ls, loaded, view)
    try:
        plan = await apply_plan.plan_for(ls, loaded, view, shape_set or 0, config, bests)
    except ValueError as exc:
        raise EditError(str(exc)) from None
    if plan.configs is not None:
        what = f"one config per shape set to {view.name} (configs=[…]: {plan.why})"
        return set_configs(text, view.name, plan.configs), what
    return set_config(text, view.name, config), f"the tuned config to {view.name} (every shape set)"
