"""End to end: open / change / save -> staged diagnostics from the real server process."""

from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    apply_text_edits,
    attr,
    change_doc,
    close_doc,
    end_session,
    final_diagnostics,
    line_of,
    make_workspace,
    open_doc,
    rec,
    request,
    save_doc,
    server_config,
    stage_diagnostics,
    start,
    version_of,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")
UNROLL = 'config=helion.Config(block_sizes=[1, 512, 512], pallas_loop_type="unroll")'


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("diag"))
    lsp_client.ws = ws
    await start(lsp_client, ws, libtpu=False)
    yield
    await end_session(lsp_client)


async def stats(client: LanguageClient) -> dict:
    return await request(client, "helion/stats", {})


async def test_attention_32k_unroll_is_out_of_vmem_on_its_config(client: LanguageClient):
    path = client.ws / "attention_unroll.py"
    text = (
        (client.ws / "attention.py")
        .read_text()
        .replace("@helion.kernel(static_shapes=True)", f"@helion.kernel(static_shapes=True, {UNROLL})")
    )
    path.write_text(text)
    uri = open_doc(client, path, text)
    diags = await stage_diagnostics(client, uri, 1, "front")
    overflow = [d for d in diags if d.code == "HPL300"]
    assert len(overflow) == 1, diags
    d = overflow[0]
    assert d.severity == types.DiagnosticSeverity.Error
    assert d.range.start.line == line_of(text, UNROLL)  # the config that chose these blocks
    assert "out of VMEM on v7x" in d.message
    # only the 32k shape set overflows, and the diagnostic says so and points at its args line
    assert "[shape set 1: q=bf16[8, 32, 32768, 256]" in d.message
    related = {(r.location.range.start.line, r.message) for r in d.related_information}
    assert (
        line_of(text, "# helion: args(q=bf16[8, 32, 32768"),
        "shape set 1: " + d.message.split("[shape set 1: ")[1][:-1],
    ) in related
    assert any(line == line_of(text, "k_blk = k_view[tile_b, tile_n, :]") for line, _ in related)
    assert d.source == "helion"


async def test_stages_publish_front_first_then_lowering(client: LanguageClient):
    path = client.ws / "softmax.py"
    uri = open_doc(client, path)
    front = await stage_diagnostics(client, uri, 1, "front")
    final = await final_diagnostics(client, uri, 1)
    notes = [p for p in rec(client).of("helion/diagnosticsStage") if attr(p, "uri") == uri]
    assert [attr(p, "stage") for p in notes] == ["front", "lower"]
    assert [attr(p, "final") for p in notes] == [False, True]
    assert all(d.code != "HPL900" for d in final), final  # the lowering check ran and finished
    assert {d.code for d in front} <= {d.code for d in final} | {"HPL301", "HPL501"}


async def test_old_versions_are_never_published_after_newer_ones(client: LanguageClient):
    path = client.ws / "bmm.py"
    text = path.read_text()
    uri = open_doc(client, path, text)
    await final_diagnostics(client, uri, 1)
    for i in range(4):  # edits and saves in quick succession
        change_doc(client, uri, text.replace("acc.to(out.dtype)", f"acc.to(out.dtype) * {i + 2}"))
        save_doc(client, uri)
    last = version_of(uri)
    await final_diagnostics(client, uri, last)
    versions = [p.version for p in rec(client).of("diagnostics") if p.uri == uri]
    assert versions == sorted(versions), versions
    assert versions[-1] == last


async def test_unchanged_kernels_are_not_recompiled_and_ranges_follow_the_text(client: LanguageClient):
    path = client.ws / "two.py"
    add = (client.ws / "add.py").read_text()
    attention = (
        (client.ws / "attention.py")
        .read_text()
        .replace("@helion.kernel(static_shapes=True)", f"@helion.kernel(static_shapes=True, {UNROLL})")
    )
    body = attention.split('"""', 2)[2].split("def reference")[0]
    text = add.split("def reference")[0] + body
    uri = open_doc(client, path, text)
    first = await final_diagnostics(client, uri, 1)
    before = (await stats(client))["counts"]["compiles"]
    # comments, blank lines and a moved kernel: same normalised source, so nothing recompiles
    moved = text.replace(
        "# helion: args(x=", "# two blank lines and a comment\n\n\n# helion: args(x=", 1
    ).replace("        m_i = hl.full", "        # running max\n        m_i = hl.full")
    version = change_doc(client, uri, moved)
    save_doc(client, uri)
    second = await final_diagnostics(client, uri, version)
    assert (await stats(client))["counts"]["compiles"] == before
    old = next(d for d in first if d.code == "HPL300")
    new = next(d for d in second if d.code == "HPL300")
    assert new.range.start.line == old.range.start.line + 3
    assert new.range.start.line == line_of(moved, UNROLL)
    loop = line_of(moved, "for tile_b, tile_m in hl.tile(")
    assert loop in {r.location.range.start.line for r in new.related_information}
    # a real edit of one kernel recompiles that kernel's shape sets only
    edited = moved.replace("x[tile] + y[tile]", "x[tile] - y[tile]")
    version = change_doc(client, uri, edited)
    save_doc(client, uri)
    await final_diagnostics(client, uri, version)
    assert (await stats(client))["counts"]["compiles"] == before + 2


async def test_files_without_kernels_cost_nothing(client: LanguageClient):
    before = (await stats(client))["counts"]
    path = client.ws / "plain.py"
    path.write_text("import os\n\nprint(os.getcwd())\n")
    uri = open_doc(client, path)
    save_doc(client, uri)
    await asyncio.sleep(0.3)
    after = (await stats(client))["counts"]
    assert after == before
    assert not [p for p in rec(client).of("diagnostics") if p.uri == uri]


async def test_a_kernel_that_crashes_the_compiler_gives_one_diagnostic(client: LanguageClient):
    path = client.ws / "crash.py"
    text = (client.ws / "add.py").read_text().replace("x[tile] + y[tile]", " + ".join(["x[tile]"] * 300))
    uri = open_doc(client, path, text)
    diags = await final_diagnostics(client, uri, 1)
    assert len(diags) == 1, diags
    assert diags[0].severity == types.DiagnosticSeverity.Error
    # and the server still works
    other = open_doc(client, client.ws / "add.py")
    assert [
        d for d in await final_diagnostics(client, other, 1) if d.severity == types.DiagnosticSeverity.Error
    ] == []


async def test_close_clears_and_closed_documents_are_ignored(client: LanguageClient):
    path = client.ws / "batch_softmax.py"
    text = path.read_text().replace("torch.exp(row - row_max)", "torch.exp(row - undefined_name)")
    uri = open_doc(client, path, text)
    diags = await final_diagnostics(client, uri, 1)
    assert any(d.severity == types.DiagnosticSeverity.Error for d in diags)
    close_doc(client, uri)
    await rec(client).wait(
        lambda: any(p.uri == uri and len(p.diagnostics) == 0 for p in rec(client).of("diagnostics"))
    )
    # requests about the closed document answer empty, not with an error
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=9, character=6)
        )
    )
    assert hover is None
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert not lenses
    save_doc(client, uri)  # a save for a closed document is logged and ignored
    with pytest.raises(Exception, match="not open"):
        await client.protocol.send_request_async(
            "helion/generatedCode", {"uri": uri, "kernel": "batch_softmax", "shapeSet": 0}
        )


async def code_actions(client: LanguageClient, uri: str, diag: types.Diagnostic) -> list[types.CodeAction]:
    return list(
        await client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=diag.range,
                context=types.CodeActionContext(diagnostics=[diag], only=[types.CodeActionKind.QuickFix]),
            )
        )
    )


def applied(text: str, action: types.CodeAction) -> str:
    return apply_text_edits(text, action.edit.document_changes[0].edits)


async def test_quick_fixes_edit_the_decorator_config_and_clear_the_diagnostic(client: LanguageClient):
    path = client.ws / "attention_fix.py"
    text = (
        (client.ws / "attention.py")
        .read_text()
        .replace("@helion.kernel(static_shapes=True)", f"@helion.kernel(static_shapes=True, {UNROLL})")
    )
    uri = open_doc(client, path, text)
    overflow = next(d for d in await stage_diagnostics(client, uri, 1, "front") if d.code == "HPL300")
    actions = await code_actions(client, uri, overflow)
    assert [a.title.split(" — ")[0] for a in actions] == ['Set pallas_loop_type="emit_pipeline"']
    fixed = applied(text, actions[0])
    assert fixed == text.replace('pallas_loop_type="unroll"', 'pallas_loop_type="emit_pipeline"')
    version = change_doc(client, uri, fixed)
    save_doc(client, uri)
    assert not [d for d in await stage_diagnostics(client, uri, version, "front") if d.code == "HPL300"]

    path = client.ws / "add_fix.py"
    text = (
        (client.ws / "add.py")
        .read_text()
        .replace(
            "@helion.kernel(static_shapes=True)",
            "@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[100, 128]))",
        )
    )
    uri = open_doc(client, path, text)
    illegal = [d for d in await stage_diagnostics(client, uri, 1, "front") if d.code == "HPL205"]
    assert len(illegal) == 2, illegal  # one per shape set (a warning: the block is raised to a legal size)
    actions = await code_actions(client, uri, illegal[0])
    assert [a.title for a in actions] == ["Use block size 128 for block_sizes[0]"]
    fixed = applied(text, actions[0])
    assert fixed == text.replace("block_sizes=[100, 128]", "block_sizes=[128, 128]")
    version = change_doc(client, uri, fixed)
    save_doc(client, uri)
    assert not [d for d in await stage_diagnostics(client, uri, version, "front") if d.severity == 1]


async def test_libtpu_stage_runs_last_when_enabled(client: LanguageClient):
    for uri in list(rec(client).texts):  # only this test's document should reach the (slow) libtpu stage
        close_doc(client, uri)
    client.set_configuration({"libtpu": True}, section="helion", scope_uri=client.ws.as_uri())
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    path = client.ws / "softmax_tpu.py"
    text = (client.ws / "softmax.py").read_text().replace("def softmax(", "def softmax_tpu(")
    await asyncio.sleep(0.3)  # the server pulls the configuration
    uri = open_doc(client, path, text)
    final = await final_diagnostics(client, uri, 1, timeout=180)
    notes = [p for p in rec(client).of("helion/diagnosticsStage") if attr(p, "uri") == uri]
    assert [attr(p, "stage") for p in notes] == ["front", "lower", "tpu"]
    assert [attr(p, "final") for p in notes] == [False, False, True]
    assert not [d for d in final if d.code in ("HPL900", "HPL401")], final
    client.set_configuration({"libtpu": False}, section="helion", scope_uri=client.ws.as_uri())
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
