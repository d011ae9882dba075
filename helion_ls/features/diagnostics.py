"""Document events -> staged analysis (see `analysis.py`) and published diagnostics.

Open and save compile; a change re-parses after the debounce (so lenses, hovers and stale-tuning
detection follow the text) and compiles only with `compileOnChange`. A Python file changed on disk is
recompiled: an open one from its buffer (the client reloads it), a closed one from the file. Files that
never mention helion are not even parsed.
"""

from __future__ import annotations

import asyncio
import logging

from lsprotocol import types
from pygls.uris import from_fs_path

from ..documents import HELION_HINT
from .host import Host

log = logging.getLogger(__name__)

EXTERNAL_DELAY = 0.3  # let the client's reload (didChange) arrive first


def schedule(ls: Host, uri: str, compile: bool, delay: float = 0.0) -> None:
    """(Re)start the analysis of `uri`'s current text; a pending one for an older text is dropped."""
    state = ls.analyzer.docs.get(uri)
    if state is None:
        return
    if not state.mentions_helion and not state.published and state.loaded is None:
        return
    if state.pending is not None and not state.pending.done():
        state.pending.cancel()
    state.pending = asyncio.create_task(_run(ls, uri, compile or state.force_compile, delay))


async def _run(ls: Host, uri: str, compile: bool, delay: float) -> None:
    if delay > 0:
        await asyncio.sleep(delay)
    state = ls.analyzer.docs.get(uri)
    if state is None:
        return
    settings = ls.settings.for_uri(uri)
    try:
        if compile:
            state.force_compile = False
            await ls.analyzer.analyze(uri, settings.chip, settings.libtpu)
        else:
            await ls.analyzer.load(uri, settings.chip)
    except asyncio.CancelledError:
        raise
    except Exception:  # a bug here must cost one document's diagnostics, not the server
        log.exception("analysis of %s failed", uri)
    ls.monitor.collect_soon()


def _sync(ls: Host, uri: str) -> None:
    doc = ls.workspace.get_text_document(uri)
    ls.analyzer.update(uri, doc.version, doc.source)


def external_change(ls: Host, path: str, deleted: bool) -> None:
    """A Python file in the workspace changed outside the editor."""
    uri = from_fs_path(path)
    if uri is None:
        return
    state = ls.analyzer.docs.get(uri)
    if state is not None and state.open:
        state.force_compile = True
        schedule(ls, uri, compile=True, delay=EXTERNAL_DELAY)
        return
    if deleted:
        ls.analyzer.close(uri)
        return
    asyncio.create_task(_external_closed(ls, uri, path))


async def _external_closed(ls: Host, uri: str, path: str) -> None:
    try:
        text = await ls.pool.call(_read, path)
    except OSError as exc:
        log.info("cannot read %s after it changed: %s", path, exc)
        return
    state = ls.analyzer.docs.get(uri)
    if state is not None and state.open:
        return  # opened meanwhile: the editor's text wins
    if state is None and not HELION_HINT.search(text):
        return
    ls.analyzer.update(uri, None, text, is_open=False)
    schedule(ls, uri, compile=True)


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def register(ls: Host) -> None:
    @ls.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: Host, params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        ls.analyzer.update(doc.uri, doc.version, ls.workspace.get_text_document(doc.uri).source)
        schedule(ls, doc.uri, compile=True)

    @ls.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: Host, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        _sync(ls, uri)
        settings = ls.settings.for_uri(uri)
        schedule(ls, uri, compile=settings.compile_on_change, delay=settings.debounce_ms / 1000)

    @ls.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: Host, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if uri not in ls.workspace.text_documents:
            log.warning("didSave for %s, which is not open; ignored", uri)
            return
        _sync(ls, uri)
        schedule(ls, uri, compile=True)

    @ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: Host, params: types.DidCloseTextDocumentParams) -> None:
        ls.analyzer.close(params.text_document.uri)
