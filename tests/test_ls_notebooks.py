"""End to end over the LSP: a Jupyter notebook opened as VS Code opens one (notebook document sync).

The notebook (tests/notebooks/row_kernels.ipynb) is written in the style of upstream Helion's notebooks: a
`%pip` / `!` cell, markdown, imports, one kernel per cell, a `%%timeit` cell and calls in later cells. Every
result must come back on the cell it belongs to, by the cell's own URI and line numbers: diagnostics,
lenses, hovers, Apply, kernelAt, the generated code's source map; and a cell edit recompiles.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import REPO, Recorder, attr, end_session, rec, request, server_config, start

import compiler
from compiler.frontend.notebook import read_notebook
from compiler.tune.keys import TrialKey, shape_key
from compiler.tune.store import TuningStore

pytestmark = pytest.mark.asyncio(loop_scope="module")
NOTEBOOK = REPO / "tests" / "notebooks" / "row_kernels.ipynb"
TIMEOUT = 120.0


@dataclass
class Cell:
    id: str
    uri: str
    text: str
    version: int = 1
    kind: str = "code"


class Notebook:
    """The client's side of one open notebook: its cells, markdown ones too, as VS Code syncs them."""

    def __init__(self, client: LanguageClient, uri: str, cells: list[Cell]):
        self.client, self.uri, self.cells, self.version = client, uri, cells, 1

    def cell(self, cell_id: str) -> Cell:
        return next(c for c in self.cells if c.id == cell_id)

    def by_uri(self, uri: str) -> Cell:
        return next(c for c in self.cells if c.uri == uri)

    def _identifier(self) -> types.VersionedNotebookDocumentIdentifier:
        self.version += 1
        return types.VersionedNotebookDocumentIdentifier(version=self.version, uri=self.uri)

    def edit(self, cell_id: str, text: str) -> None:
        """Replace one cell's text (one whole-content change), as typing in a cell does."""
        cell = self.cell(cell_id)
        cell.text, cell.version = text, cell.version + 1
        rec(self.client).texts[cell.uri] = text
        change = types.NotebookDocumentCellContentChanges(
            document=types.VersionedTextDocumentIdentifier(uri=cell.uri, version=cell.version),
            changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
        self.client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=self._identifier(),
                change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[change])),
            )
        )

    def insert(self, index: int, cell: Cell) -> None:
        self.cells.insert(index, cell)
        self._structure(index, 0, [cell], [])

    def delete(self, cell_id: str) -> None:
        cell = self.cell(cell_id)
        index = self.cells.index(cell)
        self.cells.remove(cell)
        self._structure(index, 1, [], [cell])

    def _structure(self, start: int, deleted: int, added: list[Cell], removed: list[Cell]) -> None:
        structure = types.NotebookDocumentCellChangeStructure(
            array=types.NotebookCellArrayChange(start=start, delete_count=deleted, cells=[_nb_cell(c) for c in added]),
            did_open=[_item(c) for c in added],
            did_close=[types.TextDocumentIdentifier(uri=c.uri) for c in removed],
        )
        for c in added:
            rec(self.client).texts[c.uri] = c.text
        self.client.notebook_document_did_change(
            types.DidChangeNotebookDocumentParams(
                notebook_document=self._identifier(),
                change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(structure=structure)),
            )
        )

    async def analysed(self) -> None:
        """Wait until the last stage of the notebook's current version was published."""
        r: Recorder = rec(self.client)
        version = self.version
        await r.wait(
            lambda: any(
                attr(p, "uri") == self.uri and attr(p, "version") == version and attr(p, "final")
                for p in r.of("helion/diagnosticsStage")
            ),
            TIMEOUT,
        )

    def diagnostics(self, cell_id: str) -> list[types.Diagnostic]:
        return list(self.client.diagnostics.get(self.cell(cell_id).uri, []))


def _nb_cell(cell: Cell) -> types.NotebookCell:
    kind = types.NotebookCellKind.Code if cell.kind == "code" else types.NotebookCellKind.Markup
    return types.NotebookCell(kind=kind, document=cell.uri)


def _item(cell: Cell) -> types.TextDocumentItem:
    language = "python" if cell.kind == "code" else "markdown"
    return types.TextDocumentItem(uri=cell.uri, language_id=language, version=cell.version, text=cell.text)


def cell_uri(path, index: int) -> str:
    """A cell URI as VS Code writes them (its fragment is percent-encoded)."""
    return f"vscode-notebook-cell:{path}#W{index}sZmlsZQ%3D%3D"


def open_notebook(client: LanguageClient, path) -> Notebook:
    doc = json.loads(path.read_text())
    cells = [Cell(c["id"], cell_uri(path, i), "".join(c["source"]), kind=c["cell_type"]) for i, c in enumerate(doc["cells"])]
    for c in cells:
        rec(client).texts[c.uri] = c.text
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=path.as_uri(), notebook_type="jupyter-notebook", version=1, cells=[_nb_cell(c) for c in cells]
            ),
            cell_text_documents=[_item(c) for c in cells],
        )
    )
    return Notebook(client, path.as_uri(), cells)


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    root = tmp_path_factory.mktemp("notebooks")
    ws = root / "ws"
    ws.mkdir()
    (ws / "row_kernels.ipynb").write_text(NOTEBOOK.read_text())
    lsp_client.ws = ws
    lsp_client.store = root / "store" / "tuning.sqlite"
    caps = pytest_lsp.client_capabilities("visual-studio-code")  # recorded before VS Code synced notebooks
    caps.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities(dynamic_registration=True)
    )
    result = await start(lsp_client, ws, caps, libtpu=False, tuneMaxEvals=3, executor="inline")
    [selector] = result.capabilities.notebook_document_sync.notebook_selector
    assert selector.notebook == "jupyter-notebook" and selector.cells is None  # every cell: they count
    yield
    await end_session(lsp_client)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def nb(client: LanguageClient) -> Notebook:
    notebook = open_notebook(client, client.ws / "row_kernels.ipynb")
    await notebook.analysed()
    return notebook


async def lenses(client: LanguageClient, uri: str) -> list[types.CodeLens]:
    return list(
        await client.text_document_code_lens_async(types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    )


async def hover(client: LanguageClient, uri: str, line: int, character: int) -> types.Hover | None:
    return await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=character)
        )
    )


def line_in(cell: Cell, needle: str) -> int:
    return cell.text[: cell.text.index(needle)].count("\n")


def errors(diags: list[types.Diagnostic]) -> list[types.Diagnostic]:
    return [d for d in diags if d.severity == types.DiagnosticSeverity.Error]


async def test_kernel_cells_get_lenses_and_no_errors_anywhere(client: LanguageClient, nb: Notebook):
    for cell in nb.cells:  # the %pip / ! cell, the %%timeit cell and `%time` in main() are not Python errors
        assert not errors(nb.diagnostics(cell.id)), (cell.id, nb.diagnostics(cell.id))
    for cell_id, kernel in (("a4", "row_softmax"), ("a6", "row_sum")):
        found = await lenses(client, nb.cell(cell_id).uri)
        tune = [lens for lens in found if lens.command.command == "helion.tune"]
        assert [lens.command.title for lens in tune] == ["Tune on v7x"], [lens.command.title for lens in found]
        assert tune[0].range.start.line == 0  # the cell's own `# helion: args(...)` line
        assert tune[0].command.arguments[0] == {"uri": nb.uri, "kernel": kernel, "shapeSet": 0}
    for cell_id in ("a1", "a2", "a3", "a7", "a8", "a9"):  # lenses are asked for per cell: only kernel cells have any
        assert await lenses(client, nb.cell(cell_id).uri) == []


async def test_hovers_at_the_cells_own_positions(client: LanguageClient, nb: Notebook):
    cell = nb.cell("a6")
    line = line_in(cell, "def row_sum")
    found = await hover(client, cell.uri, line, 6)
    assert found is not None and "**row_sum**" in found.contents.value and "VMEM" in found.contents.value
    assert found.range.start == types.Position(line=line, character=4)
    load_line = line_in(cell, "x[tile_r, tile_c]")
    access = await hover(client, cell.uri, load_line, cell.text.splitlines()[load_line].index("x[tile_r") + 1)
    assert access is not None and "load of" in access.contents.value
    assert access.range.start.line == load_line
    # The same position in another cell is that cell's text, not this kernel.
    other = nb.cell("a4")
    assert line < len(other.text.splitlines())
    shown = await hover(client, other.uri, line, 6)
    assert shown is None or "**row_sum**" not in shown.contents.value


async def test_kernel_at_and_generated_code_from_a_cell(client: LanguageClient, nb: Notebook):
    cell = nb.cell("a6")
    loop = line_in(cell, "for tile_c")
    at = await request(client, "helion/kernelAt", {"uri": cell.uri, "position": {"line": loop, "character": 8}})
    assert at == {"kernel": "row_sum", "shapeSet": 0, "uri": nb.uri}
    code = await request(client, "helion/generatedCode", {"uri": cell.uri, "kernel": "row_sum", "shapeSet": 0})
    assert "pallas_call" in code["source"] and "row_kernels.ipynb" in code["uri"]
    assert f"# row_kernels.ipynb:cell 6:{loop + 1}" in code["source"]  # lines named as the notebook shows them
    entries = code["sourceMap"]
    assert entries and all(e["uri"] == cell.uri for e in entries)
    lines = cell.text.splitlines()
    assert any(lines[e["range"]["start"]["line"]].lstrip().startswith("acc = acc +") for e in entries)


async def test_apply_edits_the_kernel_cell(client: LanguageClient, nb: Notebook):
    module = compiler.load(read_notebook(NOTEBOOK.read_text()), "row_kernels.ipynb")
    kernel = module.kernels["row_softmax"]
    best = {"block_sizes": [128]}
    key = TrialKey(kernel.source_hash, shape_key(kernel.shape_sets[0]), "v7x", "model")
    with TuningStore(client.store) as store:
        store.record_trial(key, best, 1e-6, "ok", {"gbps": 100.0})
    cell = nb.cell("a4")
    r = rec(client)
    apply = None
    for _ in range(100):  # the lens shows the best once the server saw the store change
        apply = next((lens for lens in await lenses(client, cell.uri) if lens.command.command == "helion.applyConfig"), None)
        if apply is not None:
            break
        await asyncio.sleep(0.2)
    assert apply is not None
    # The refactoring code action at a cell position offers the same config, as an edit of this cell.
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=cell.uri),
            range=types.Range(start=types.Position(line=3, character=4), end=types.Position(line=3, character=4)),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    action = next(a for a in actions if a.title.startswith("Apply tuned config"))
    assert [change.text_document.uri for change in action.edit.document_changes] == [cell.uri]
    edits_before = len(r.edits)
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=apply.command.command, arguments=apply.command.arguments)
    )
    assert attr(result, "applied") is True
    change = r.edits[edits_before].document_changes[0]
    assert change.text_document.uri == cell.uri and change.text_document.version == cell.version
    text = r.texts[cell.uri]
    decorator = text.splitlines()[line_in(cell, "@helion.kernel")]
    assert decorator == "@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128]))", text
    assert text.replace("[128]", "[8]") == cell.text  # nothing else changed
    nb.edit("a4", text)  # the client's didChange for the applied edit
    await nb.analysed()
    assert not errors(nb.diagnostics("a4"))


async def test_a_quick_fix_edits_the_cell(client: LanguageClient, nb: Notebook):
    cell = nb.cell("a4")
    original = cell.text
    nb.edit("a4", original.replace("block_sizes=[128]", "block_sizes=[100]").replace("block_sizes=[8]", "block_sizes=[100]"))
    await nb.analysed()
    [diag] = [d for d in nb.diagnostics("a4") if d.code == "HPL205"]
    assert diag.range.start.line == line_in(cell, "for tile_r"), diag  # on the loop it sizes, in the cell
    decorator = line_in(cell, "@helion.kernel")
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=cell.uri),
            range=diag.range,
            context=types.CodeActionContext(diagnostics=[diag], only=[types.CodeActionKind.QuickFix]),
        )
    )
    fix = next(a for a in actions if "block size 128" in a.title)
    [change] = fix.edit.document_changes
    assert (change.text_document.uri, change.text_document.version) == (cell.uri, cell.version)
    [edit] = change.edits
    assert edit.range.start.line == decorator and "block_sizes=[128]" in edit.new_text
    nb.edit("a4", original)
    await nb.analysed()


async def test_a_cell_edit_that_breaks_a_kernel_is_diagnosed_on_that_cells_line(client: LanguageClient, nb: Notebook):
    cell = nb.cell("a6")
    original = cell.text
    broken = original.replace("x[tile_r, tile_c].sum", "x_typo[tile_r, tile_c].sum")
    nb.edit("a6", broken)
    await nb.analysed()
    found = errors(nb.diagnostics("a6"))
    assert found and found[0].range.start.line == line_in(cell, "x_typo[tile_r"), found
    assert "x_typo" in found[0].message
    assert all(not errors(nb.diagnostics(c.id)) for c in nb.cells if c.id != "a6")
    nb.edit("a6", original)
    await nb.analysed()
    assert not errors(nb.diagnostics("a6"))


async def test_a_syntax_error_in_the_only_kernel_cell_is_diagnosed_there(client: LanguageClient, nb: Notebook):
    """The cell that does not parse is left out of the module; it may be the only one that says "helion"."""
    doc = json.loads(NOTEBOOK.read_text())
    kernel = "".join(next(c for c in doc["cells"] if c.get("id") == "a4")["source"])
    imports = "".join(next(c for c in doc["cells"] if c.get("id") == "a3")["source"])
    doc["cells"] = [{"cell_type": "code", "id": "only", "metadata": {}, "source": imports + "\n\n\n" + kernel}]
    path = client.ws / "one_cell.ipynb"
    path.write_text(json.dumps(doc))
    single = open_notebook(client, path)
    await single.analysed()
    cell = single.cell("only")
    assert not errors(single.diagnostics("only"))
    broken = cell.text.replace("for tile_r in hl.tile(rows):", "for tile_r in hl.tile(rows)")
    single.edit("only", broken)
    await single.analysed()
    [found] = errors(single.diagnostics("only"))
    assert found.code == "HPL100" and found.range.start.line == line_in(cell, "for tile_r"), found
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=single.uri),
            cell_text_documents=[types.TextDocumentIdentifier(uri=c.uri) for c in single.cells],
        )
    )


async def test_cells_inserted_and_deleted(client: LanguageClient, nb: Notebook):
    """A new cell above the kernels moves their module lines, not their cell lines; a cell that does not
    parse is diagnosed on its own line and the other cells' kernels still have their lenses."""
    path = client.ws / "row_kernels.ipynb"
    broken = Cell("new", cell_uri(path, 99), "# scratch\nvalues = [1, 2,\n\n%timeit sum(values)\n")
    nb.insert(1, broken)
    await nb.analysed()
    found = errors(nb.diagnostics("new"))
    assert [d.code for d in found] == ["HPL100"] and found[0].range.start.line in (1, 2, 3), found
    titles = [lens.command.title for lens in await lenses(client, nb.cell("a6").uri)]
    assert "Tune on v7x" in titles
    cell = nb.cell("a6")
    found = await hover(client, cell.uri, line_in(cell, "def row_sum"), 6)
    assert found is not None and "**row_sum**" in found.contents.value
    nb.delete("new")
    await nb.analysed()
    assert not errors(nb.diagnostics("a6"))
    assert list(client.diagnostics.get(broken.uri, [None])) == []  # the deleted cell's diagnostics are cleared


async def test_tuning_from_a_cell_runs_only_what_the_kernel_needs(client: LanguageClient, nb: Notebook, tmp_path):
    """Tune on a cell's kernel: the correctness check runs the kernel eagerly, never the notebook's other cells
    (a cell that writes a file, the `%%timeit` cell's code, `main()`)."""
    ran = tmp_path / "cell.ran"
    path = client.ws / "row_kernels.ipynb"
    nb.insert(3, Cell("side", cell_uri(path, 98), f"open({str(ran)!r}, 'w').write('ran')\n!touch {ran}"))
    await nb.analysed()
    r = rec(client)
    before = len(r.of("helion/tuningState"))
    reply = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="helion.tune", arguments=[{"uri": nb.cell("a6").uri, "kernel": "row_sum", "shapeSet": 0}]
        )
    )
    assert [attr(job, "uri") for job in attr(reply, "jobs")] == [nb.uri]

    def finished() -> list:
        return [s for s in r.of("helion/tuningState")[before:] if attr(s, "state") in ("done", "failed")]

    final = (await r.wait(finished, 300))[-1]
    assert attr(final, "state") == "done", final
    assert attr(attr(attr(final, "best"), "correctness"), "verdict") == "ok", final  # the kernel did run
    assert not ran.exists()
    nb.delete("side")
    # Other shapes on the same shape line: the run's best (for the old shapes) is not theirs (Retune).
    cell = nb.cell("a6")
    original = cell.text
    nb.edit("a6", original.replace("x=f32[256, 2048]", "x=f32[512, 1024]"))
    await nb.analysed()
    titles = [lens.command.title for lens in await lenses(client, cell.uri)]
    assert titles == ["x: f32[512, 1024]", "Retune on v7x (shapes changed)"], titles
    nb.edit("a6", original)
    await nb.analysed()


async def test_lenses_asked_for_before_the_notebook_opened_are_refreshed(client: LanguageClient, nb: Notebook):
    """VS Code opens a notebook's cell documents first: a cell's editor may ask for lenses before the notebook's
    didOpen reaches the server. The server then asks the client to ask again."""
    path = client.ws / "second.ipynb"
    path.write_text(NOTEBOOK.read_text())
    early = cell_uri(path, 3)  # the row_softmax cell, by the URI it will have
    assert await lenses(client, early) == []
    r = rec(client)
    refreshes = len(r.of("codeLens/refresh"))
    second = open_notebook(client, path)
    await r.wait(lambda: len(r.of("codeLens/refresh")) > refreshes, TIMEOUT)
    assert second.cell("a4").uri == early
    assert any(lens.command.command == "helion.tune" for lens in await lenses(client, early))
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=second.uri),
            cell_text_documents=[types.TextDocumentIdentifier(uri=c.uri) for c in second.cells],
        )
    )


async def test_a_kernel_without_a_shape_line_gets_the_shapes_of_its_calls_in_later_cells(
    client: LanguageClient, nb: Notebook
):
    """Notebook kernels rarely have shape lines: their calls are in later cells (here `main()` calls
    `check(512, 1024)`, which calls the kernel). The notebook is one module, so those calls give the shapes,
    labelled with the cell and line of the call; the `%%timeit` cell and the `%time` line are not Python and
    give none."""
    cell = nb.cell("a6")
    original = cell.text
    nb.edit("a6", original.replace("# helion: args(x=f32[256, 2048])\n", ""))
    await nb.analysed()
    assert not nb.diagnostics("a6"), nb.diagnostics("a6")
    found = await lenses(client, cell.uri)
    where = f"cell 9:{line_in(nb.cell('a9'), 'check(512, 1024)') + 1}"
    assert found[0].command.title == f"x: f32[512, 1024] (from check(512, 1024) at {where})", found
    assert found[0].range.start.line == 0  # on the kernel's decorator, first line of its cell now
    titles = [lens.command.title for lens in found]  # Retune: a test above tuned shape set 0 at other shapes
    assert "Tune on v7x" in titles or "Retune on v7x (shapes changed)" in titles, titles
    text = (await hover(client, cell.uri, line_in(cell, "def row_sum"), 6)).contents.value
    assert f"Shape set 0: `x=f32[512, 1024]` — from `check(512, 1024)` at {where}" in text and "VMEM" in text
    nb.edit("a6", original)
    await nb.analysed()


async def test_closing_the_notebook_clears_its_cells(client: LanguageClient, nb: Notebook):
    nb.edit("a6", nb.cell("a6").text.replace("x[tile_r, tile_c].sum", "x_typo[tile_r, tile_c].sum"))
    await nb.analysed()
    assert errors(nb.diagnostics("a6"))
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=nb.uri),
            cell_text_documents=[types.TextDocumentIdentifier(uri=c.uri) for c in nb.cells],
        )
    )
    await rec(client).wait(lambda: nb.diagnostics("a6") == [], TIMEOUT)
    assert await lenses(client, nb.cell("a6").uri) == []

