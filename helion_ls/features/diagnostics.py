"""Document events -> staged analysis (see `analysis.py`) and published diagnostics.

Open and save compile; a change re-parses after the debounce (so lenses, hovers and stale-tuning
detection follow the text) and compiles only with `compileOnChange` (scheduling.py runs the analysis; a
file changed on disk is disk_changes.py's). Files that never mention helion are not even parsed.
"""

from __future__ import annotations

import logging

from lsprotocol import types

from .host import Host
from .scheduling import schedule

log = logging.getLogger(__name__)


def _sync(ls: Host, uri: str) -> None:
    doc = ls.workspace.get_text_document(uri)
    ls.analyzer.update(uri, doc.version, doc.source)


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
