"""Jupyter notebooks (LSP 3.17 notebook document sync): a notebook is analysed as one module of its code cells.

notebookDocument/didOpen, didChange (cell text edits; cells inserted, deleted or moved), didSave and didClose
rebuild that module (compiler.frontend.notebook: the Python cells in order, IPython-only lines blanked in place) and
run the same staged analysis as a file's (features/diagnostics.py) under the notebook's URI; its `Layout`
(layout.py) then shows every result on the cell it belongs to, and every feature takes a cell's URI. Cells are
run, not saved, so an edit compiles after the debounce (`debounceMs`), as `compileOnChange` makes a file do:
compiling only reads the cells, it never runs them.
"""

from __future__ import annotations

from urllib.parse import unquote

from lsprotocol import types

from compiler.frontend.notebook import notebook_module

from ..session.documents import HELION_HINT
from .host import Host
from .scheduling import schedule


def _update(ls: Host, uri: str, version: int | None) -> None:
    """Give the analyzer the module of the notebook's Python code cells, as the workspace has them now."""
    notebook = ls.workspace.get_notebook_document(notebook_uri=uri)
    if notebook is None:
        return
    cells: list[tuple[int, str, str]] = []
    versions: dict[str, int | None] = {}
    for index, cell in enumerate(notebook.cells):
        if cell.kind != types.NotebookCellKind.Code:
            continue
        doc = ls.workspace.text_documents.get(unquote(cell.document))  # pygls keeps documents by unquoted URI
        if doc is None or doc.language_id not in (None, "python"):  # another language's cell (clients may send those)
            continue
        cells.append((index, cell.document, doc.source))
        versions[cell.document] = doc.version
    mentions = any(HELION_HINT.search(text) for _, _, text in cells)
    ls.analyzer.update_notebook(uri, version, notebook_module(cells), versions, mentions)


def register(ls: Host) -> None:
    @ls.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def did_open(ls: Host, params: types.DidOpenNotebookDocumentParams) -> None:
        notebook = params.notebook_document
        _update(ls, notebook.uri, notebook.version)
        schedule(ls, notebook.uri, compile=True)
        # A cell's editor may have asked for its lenses before the client sent this notification (VS Code opens
        # the cells' documents first) and been told there are none: have the client ask again.
        ls.lenses.changed()

    @ls.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def did_change(ls: Host, params: types.DidChangeNotebookDocumentParams) -> None:
        notebook = params.notebook_document
        _update(ls, notebook.uri, notebook.version)
        settings = ls.settings.for_uri(notebook.uri)
        schedule(ls, notebook.uri, compile=True, delay=settings.debounce_ms / 1000)

    @ls.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def did_save(ls: Host, params: types.DidSaveNotebookDocumentParams) -> None:
        schedule(ls, params.notebook_document.uri, compile=True)

    @ls.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def did_close(ls: Host, params: types.DidCloseNotebookDocumentParams) -> None:
        ls.analyzer.close(params.notebook_document.uri)
