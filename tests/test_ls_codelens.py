"""End to end: code lenses from the tuning store, refreshed when another process writes it; Apply edits.

Results are written with the real TuningStore from this (test) process, as a TPU host sharing the store
or the CLI would; the server only learns about them through its file watcher.
"""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    end_session,
    make_workspace,
    open_doc,
    rec,
    request,
    server_config,
    stage_diagnostics,
    start,
)

import compiler
from compiler.tune.keys import TrialKey, shape_key
from compiler.tune.store import TuningStore

pytestmark = pytest.mark.asyncio(loop_scope="module")
BEST = {"block_sizes": [1, 512, 512], "pallas_loop_type": "emit_pipeline"}


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("lens"))
    lsp_client.ws = ws
    lsp_client.store = ws.parent / "store" / "tuning.sqlite"
    await start(lsp_client, ws, libtpu=False)
    yield
    await end_session(lsp_client)


async def lenses(client: LanguageClient, uri: str) -> list[types.CodeLens]:
    return list(
        await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
    )


def titles(found: list[types.CodeLens]) -> list[tuple[int, str]]:
    return [(lens.range.start.line, lens.command.title) for lens in found]


def write_trials(
    client: LanguageClient, text: str, kernel: str, index: int, trials: list[tuple[dict, float]]
) -> None:
    k = compiler.load(text).kernels[kernel]
    key = TrialKey(k.source_hash, shape_key(k.shape_sets[index]), "v7x", "model")
    with TuningStore(client.store) as store:
        for config, seconds in trials:
            store.record_trial(key, config, seconds, "ok", {"tflops": 123.4})


async def test_lenses_tune_then_best_after_an_external_store_write_then_apply(client: LanguageClient):
    path = client.ws / "attention.py"
    text = path.read_text()
    uri = open_doc(client, path, text)
    await stage_diagnostics(client, uri, 1, "front")
    args0 = text[: text.index("# helion: args(q=bf16[8, 32, 8192")].count("\n")
    args1 = args0 + 1
    assert titles(await lenses(client, uri)) == [
        (args0, "q, k, v: bf16[8, 32, 8192, 256]"),
        (args0, "Tune on v7x"),
        (args1, "q, k, v: bf16[8, 32, 32768, 256]"),
        (args1, "Tune on v7x"),
    ]
    found = await lenses(client, uri)
    assert found[1].command.command == "helion.tune"
    assert list(found[1].command.arguments) == [{"uri": uri, "kernel": "attention", "shapeSet": 0}]
    assert found[0].command.command == "helion-ls.showGeneratedCode"

    kernel = compiler.load(text).kernels["attention"]
    current = kernel.compile(args=kernel.shape_sets[0], chip="v7x").config
    refreshes = rec(client).refreshes
    write_trials(client, text, "attention", 0, [(BEST, 1.0e-3), (dict(current), 2.5e-3)])
    await rec(client).wait(lambda: rec(client).refreshes > refreshes, timeout=20)

    found = await lenses(client, uri)
    assert titles(found) == [
        (args0, "q, k, v: bf16[8, 32, 8192, 256]"),
        (args0, "Best: bs=[1,512,512] emit_pipeline — 1.00 ms (2.50× vs current) [model estimate for v7x]"),
        (args0, "Apply"),
        (args1, "q, k, v: bf16[8, 32, 32768, 256]"),
        (args1, "Tune on v7x"),
    ]
    assert found[1].command.tooltip.startswith("123 TF/s. 2.50× vs current. Tune again."), found[1].command.tooltip  # not in the title
    results = await request(
        client, "helion/tuningResults", {"uri": uri, "kernel": "attention", "shapeSet": 0}
    )
    assert [(t["config"], t["seconds"], t["verdict"]) for t in results["trials"]] == [
        (BEST, 1.0e-3, "ok"),
        (dict(current), 2.5e-3, "ok"),
    ]
    assert results["best"]["config"] == BEST and results["best"]["tflops"] == 123.4
    assert results["best"]["gbps"] > 0  # not stored: derived from the compiled plan's HBM bytes
    apply = found[2].command
    assert apply.command == "helion.applyConfig"
    assert list(apply.arguments) == [{"uri": uri, "kernel": "attention", "shapeSet": 0, "config": BEST}]
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=apply.command, arguments=apply.arguments)
    )
    assert result["applied"] is True
    expected = text.replace(
        "@helion.kernel(static_shapes=True)",
        '@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[1, 512, 512], pallas_loop_type="emit_pipeline"))',
    )
    assert rec(client).texts[uri] == expected
    edit = rec(client).edits[-1]
    assert edit.document_changes[0].text_document.version == 1


async def test_code_actions_offer_configs_for_all_shape_sets_and_quick_fixes(client: LanguageClient):
    path = client.ws / "softmax.py"
    text = path.read_text()
    uri = open_doc(client, path, text)
    await stage_diagnostics(client, uri, 1, "front")
    write_trials(client, text, "softmax", 0, [({"block_sizes": [16]}, 2e-3)])
    write_trials(client, text, "softmax", 1, [({"block_sizes": [64]}, 1e-4)])
    line = text[: text.index("out[tile_n, :] =")].count("\n")
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(
                start=types.Position(line=line, character=8), end=types.Position(line=line, character=8)
            ),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    by_title = {a.title: a for a in actions}
    assert set(by_title) == {
        "Apply tuned config for shape set 0: bs=[16]",
        "Apply tuned config for shape set 1: bs=[64]",
        "Apply tuned configs for all 2 shape sets (configs=[...])",
    }
    both = (
        by_title["Apply tuned configs for all 2 shape sets (configs=[...])"].edit.document_changes[0].edits[0]
    )
    assert both.new_text == ", configs=[helion.Config(block_sizes=[16]), helion.Config(block_sizes=[64])]"
    # a diagnostic that carries a compiler fix becomes a preferred quick fix with exactly that edit
    fix_range = {"start": {"line": line, "character": 4}, "end": {"line": line, "character": 7}}
    diag = types.Diagnostic(
        range=types.Range(
            start=types.Position(line=line, character=4), end=types.Position(line=line, character=7)
        ),
        message="m",
        source="helion",
        code="HPL200",
        data={"fix": {"title": "Round the block size to 128", "range": fix_range, "newText": "128"}},
    )
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=diag.range,
            context=types.CodeActionContext(diagnostics=[diag], only=[types.CodeActionKind.QuickFix]),
        )
    )
    assert [a.title for a in actions] == ["Round the block size to 128"]
    assert actions[0].is_preferred and actions[0].edit.document_changes[0].edits[0].new_text == "128"


async def test_lenses_without_shape_sets_and_for_plain_files(client: LanguageClient):
    path = client.ws / "noargs.py"
    text = (client.ws / "add.py").read_text().replace("# helion: args", "# args")
    uri = open_doc(client, path, text)
    assert titles(await lenses(client, uri)) == [
        (text[: text.index("@helion.kernel")].count("\n"), "no shape set: add a # helion: args(...) line")
    ]
    plain = client.ws / "plain.py"
    plain.write_text("x = 1\n")
    assert await lenses(client, open_doc(client, plain)) == []
