"""End to end: a file written the way upstream Helion writes its examples — no shape lines, kernels called
from `check()` through `run_example` — gets shape sets from its own calls in the editor: lenses labelled
with the call, Tune, a kernel hover with the VMEM table, and no error; a kernel nothing calls gets an
information hint whose quick fix writes shape lines (those of a kernel taking the same arguments)."""

from __future__ import annotations

import ast
import asyncio
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import end_session, final_diagnostics, line_of, open_doc, rec, server_config, start

import compiler
from compiler.ir.config import Config
from compiler.ir.specs import format_args
from compiler.tune.keys import TrialKey, shape_key
from compiler.tune.store import TuningStore

pytestmark = pytest.mark.asyncio(loop_scope="module")
ROWS = (Path(__file__).parent / "upstream_style" / "rows.py").read_text()


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = tmp_path_factory.mktemp("calls") / "ws"
    ws.mkdir()
    lsp_client.store = ws.parent / "store" / "tuning.sqlite"
    await start(lsp_client, ws, libtpu=False)
    (ws / "rows.py").write_text(ROWS)
    lsp_client.uri = open_doc(lsp_client, ws / "rows.py", ROWS)
    lsp_client.final = await final_diagnostics(lsp_client, lsp_client.uri, 1)
    yield
    await end_session(lsp_client)


async def test_no_error_and_a_hint_with_a_quick_fix_for_the_kernel_nothing_calls(client: LanguageClient):
    diags = client.final
    assert not [d for d in diags if d.severity == types.DiagnosticSeverity.Error], diags
    (hint,) = [d for d in diags if d.code == "HPL107"]
    assert hint.severity == types.DiagnosticSeverity.Information
    assert hint.range.start.line == line_of(ROWS, "@helion.kernel()\ndef never_called")
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=client.uri), range=hint.range,
        context=types.CodeActionContext(diagnostics=[hint])))
    # it takes what row_softmax takes (x): the fix copies row_softmax's shape sets rather than placeholders
    (action,) = [a for a in actions if a.title.startswith("Add row_softmax's shape lines")]
    (edit,) = action.edit.changes[client.uri] if action.edit.changes else action.edit.document_changes[0].edits
    assert edit.new_text == "# helion: args(x=bf16[64, 256])\n# helion: args(x=bf16[128, 512])\n"
    assert edit.range.start == types.Position(line=hint.range.start.line, character=0)


async def test_inferred_shape_sets_have_labelled_lenses_and_tune(client: LanguageClient):
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=client.uri)))
    decorator = line_of(ROWS, "@helion.kernel()\ndef row_softmax")
    mine = [lens.command.title for lens in lenses if lens.range.start.line == decorator]
    call = line_of(ROWS, "        check(m, n)") + 1
    assert mine == [f"x: bf16[64, 256] (from check(64, 256) at line {call})", "Tune on v7x",
                    f"x: bf16[128, 512] (from check(128, 512) at line {call})", "Tune on v7x"]
    tunes = [lens for lens in lenses if lens.command.title == "Tune on v7x"]
    kernels = {lens.command.arguments[0]["kernel"] for lens in tunes}
    assert kernels == {"row_softmax", "row_scale", "rms_fwd", "rms_bwd"}  # every kernel check() reaches


async def test_kernel_hover_shows_each_inferred_shape_set_with_its_vmem(client: LanguageClient):
    at = ROWS.index("def rms_bwd") + 5
    position = types.Position(line=ROWS[:at].count("\n"), character=5)
    result = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=client.uri), position=position))
    text = result.contents.value
    kernel = compiler.load(ROWS).kernels["rms_bwd"]
    call = line_of(ROWS, "        check(m, n)") + 1
    for index, (m, n) in enumerate([(64, 256), (128, 512)]):
        ck = kernel.compile(shape_set=index)
        assert f"#### Shape set {index}: `{format_args(ck.args)}` — from `check({m}, {n})` at line {call}" in text
        for row in ck.vmem.rows:
            assert f"| `{row.name}` | {row.role} |" in text
    assert "HPL107" not in text


async def test_the_hover_of_the_kernel_nothing_calls_says_it_lacks_shapes_not_that_it_fails(client: LanguageClient):
    at = ROWS.index("def never_called") + 5
    position = types.Position(line=ROWS[:at].count("\n"), character=5)
    result = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=client.uri), position=position))
    text = result.contents.value
    assert "#### No shape set" in text and "Not compiled yet: no `# helion: args(...)` line" in text
    assert "Does not compile" not in text


async def test_apply_on_an_inferred_shape_set_writes_configs_in_shape_set_order(client: LanguageClient):
    kernel = compiler.load(ROWS).kernels["row_softmax"]
    bests = [{"block_sizes": [32]}, {"block_sizes": [64]}]  # shape set 0 (64 rows) and 1 (128 rows) differ
    with TuningStore(client.store) as store:
        for index, config in enumerate(bests):
            key = TrialKey(kernel.source_hash, shape_key(kernel.shape_sets[index]), "v7x", "model")
            store.record_trial(key, config, 1e-5 * (index + 1), "ok", {"gbps": 100.0})
    decorator = line_of(ROWS, "@helion.kernel()\ndef row_softmax")

    async def apply_for_set_1() -> types.CodeLens | None:
        lenses = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=client.uri)))
        return next((lens for lens in lenses if lens.range.start.line == decorator
                     and lens.command.title == "Apply (configs=[…] per shape set)"
                     and lens.command.arguments[0]["shapeSet"] == 1), None)

    lens = None
    for _ in range(100):  # the lens appears once the server saw the store change (and, with this title,
        # once the Apply plan's compiles are done: until then it reads "Apply")
        lens = await apply_for_set_1()
        if lens is not None:
            break
        await asyncio.sleep(0.2)
    assert lens is not None and lens.command.title == "Apply (configs=[…] per shape set)"
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=lens.command.command, arguments=lens.command.arguments))
    assert result["applied"] is True
    applied = compiler.load(rec(client).texts[client.uri]).kernels["row_softmax"]
    assert applied.decorator_configs == [Config(c) for c in bests]
    assert [format_args(s) for s in applied.shape_sets] == ["x=bf16[64, 256]", "x=bf16[128, 512]"]
    assert [applied.config_for(i) for i in (0, 1)] == [Config(c) for c in bests]


SERVER_SIDE = """
import pickle, sys
from helion_ls.session.documents import load_document

text = open(sys.argv[1]).read()
first = load_document("file:///rows.py", 1, text, "v7x")
shapes = pickle.loads(sys.stdin.buffer.read())  # found by another process (a compile worker), as the server does
second = load_document("file:///rows.py", 1, text, "v7x", shapes)
units = {name: [u.key.shape_key for u in view.units] for name, view in second.kernels.items()}
print(repr((first.needs_call_shapes, len(first.kernels), units, "torch" in sys.modules)))
"""


async def test_the_server_side_load_takes_shapes_found_elsewhere_and_imports_no_torch():
    shapes = compiler.load(ROWS).call_shapes  # here, as in a compile worker
    done = subprocess.run([sys.executable, "-c", SERVER_SIDE, str(Path(__file__).parent / "upstream_style" / "rows.py")],
                          input=pickle.dumps(shapes), capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    needs, kernels_before, units, torch_imported = ast.literal_eval(done.stdout.decode().splitlines()[-1])
    assert (needs, kernels_before, torch_imported) == (True, 0, False)
    assert units["row_softmax"] == ["x=bf16[64, 256]", "x=bf16[128, 512]"]
    assert units["never_called"] == [""]  # no shape set: the compile says why (the HPL107 hint)


FLEX = (Path(__file__).parent / "upstream_style" / "flex.py").read_text()


async def test_a_kernel_taking_functions_gets_them_from_the_files_calls(client: LanguageClient):
    """Upstream's flex-attention style: the score function is an argument, torch's default chosen in a wrapper,
    a lambda passed in main(); no shape line. Both calls become shape sets that compile, and the hover says
    which function each was compiled with."""
    path = Path(client.uri.removeprefix("file://")).parent / "flex.py"
    path.write_text(FLEX)
    uri = open_doc(client, path, FLEX)
    diags = await final_diagnostics(client, uri, 1)
    assert not [d for d in diags if d.severity == types.DiagnosticSeverity.Error], diags
    assert not [d for d in diags if d.code == "HPL107"], diags
    position = types.Position(line=line_of(FLEX, "def flex_kernel"), character=5)
    result = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=position))
    text = result.contents.value
    call = line_of(FLEX, "    test(2, 256, lambda") + 1
    assert "#### Shape set 0: `q=f32[1, 2, 128, 64]" in text and "score_mod=_identity<" in text
    assert f"score_mod=lambda score, *_: torch.tanh(score)@{call}:" in text
    assert "Does not compile" not in text


SCALES = (Path(__file__).parent / "upstream_style" / "scales.py").read_text()


async def test_a_file_passing_0d_scales_gets_shape_sets_in_the_editor(client: LanguageClient):
    """Upstream's pretuned kernels pass scales as 0-d tensors (`torch.tensor(0.5)`, `torch.mean(x)`): the kernels
    get shape sets with `f32[]` arguments, compile, and say so in the hover."""
    path = Path(client.uri.removeprefix("file://")).parent / "scales.py"
    path.write_text(SCALES)
    uri = open_doc(client, path, SCALES)
    diags = await final_diagnostics(client, uri, 1)
    assert not [d for d in diags if d.severity == types.DiagnosticSeverity.Error], diags
    assert not [d for d in diags if d.code == "HPL107"], diags
    position = types.Position(line=line_of(SCALES, "def clamp_scale"), character=5)
    result = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=position))
    text = result.contents.value
    assert "#### Shape set 0: `x=bf16[16, 256], scale=f32[], bound=f32[], eps=1e-06`" in text, text
    assert "scale_1d" in text and "Does not compile" not in text
