"""End to end: *Apply* on a kernel with several shape sets, and what the editor shows right after it.

Attention has an 8k and a 32k shape set. A config tuned at 8k that keeps the whole sequence in VMEM
(`unroll`) is out of VMEM at 32k, so *Apply* must write one config per shape set, and its lens must say so.
After *Apply* the user is told the file has unsaved changes, and the new text compiles without a save.
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    change_doc,
    end_session,
    final_diagnostics,
    make_workspace,
    open_doc,
    rec,
    server_config,
    start,
)

import compiler
from compiler.ir.config import Config
from compiler.tune.keys import TrialKey, shape_key
from compiler.tune.store import TuningStore
from helion_ls.rewrite.edits import format_config

pytestmark = pytest.mark.asyncio(loop_scope="module")
UNROLL_8K = {"block_sizes": [1, 256, 512], "pallas_loop_type": "unroll"}  # 22 MiB at 8k, 82 MiB at 32k
PIPELINE = {"block_sizes": [1, 512, 512], "pallas_loop_type": "emit_pipeline"}
PIPELINE_32K = {"block_sizes": [1, 256, 512], "pallas_loop_type": "emit_pipeline"}


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("apply"))
    lsp_client.ws = ws
    lsp_client.store = ws.parent / "store" / "tuning.sqlite"
    await start(lsp_client, ws, libtpu=False)
    yield
    await end_session(lsp_client)


def store_best(
    client: LanguageClient, text: str, index: int, config: dict, seconds: float, name: str = "attention"
) -> None:
    kernel = compiler.load(text).kernels[name]
    key = TrialKey(kernel.source_hash, shape_key(kernel.shape_sets[index]), "v7x", "model")
    with TuningStore(client.store) as store:
        store.record_trial(key, config, seconds, "ok", {"tflops": 100.0})


async def lenses(client: LanguageClient, uri: str) -> list[types.CodeLens]:
    return list(
        await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
    )


async def apply_lens(client: LanguageClient, uri: str, line: int, title: str | None = None) -> types.CodeLens:
    """The Apply lens on `line`, once it reads `title` (its plan is worked out after the lens first shows)."""
    async def found() -> types.CodeLens | None:
        return next(
            (lens for lens in await lenses(client, uri) if lens.range.start.line == line
             and lens.command.command == "helion.applyConfig" and title in (None, lens.command.title)),
            None,
        )

    for _ in range(100):  # the lens appears once the server saw the store change
        lens = await found()
        if lens is not None:
            return lens
        await asyncio.sleep(0.2)
    raise AssertionError(f"no Apply lens on line {line}: {[lens.command.title for lens in await lenses(client, uri)]}")


async def run(client: LanguageClient, lens: types.CodeLens) -> dict:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=lens.command.command, arguments=lens.command.arguments)
    )


def errors(diags: list) -> list:
    return [d for d in diags if d.severity == types.DiagnosticSeverity.Error]


async def test_apply_writes_a_config_per_shape_set_when_the_best_does_not_fit_another(client: LanguageClient):
    path = client.ws / "attention.py"
    text = path.read_text()
    uri = open_doc(client, path, text)
    assert not errors(await final_diagnostics(client, uri, 1))
    line0 = text[: text.index("# helion: args(q=bf16[8, 32, 8192")].count("\n")
    store_best(client, text, 0, UNROLL_8K, 1.0e-3)
    lens = await apply_lens(client, uri, line0, "Apply (configs=[…] per shape set)")
    messages, refreshes = len(client.messages), rec(client).refreshes
    assert (await run(client, lens))["applied"] is True

    kernel = compiler.load(text).kernels["attention"]
    default_32k = kernel.compile(args=kernel.shape_sets[1], chip="v7x").config
    applied = rec(client).texts[uri]
    written = compiler.load(applied).kernels["attention"].decorator_configs
    assert written == [Config(UNROLL_8K), default_32k], applied
    for index in (0, 1):  # what was written compiles cleanly for both shape sets
        k = compiler.load(applied).kernels["attention"]
        ck = k.compile(args=k.shape_sets[index], chip="v7x")
        assert not [d for d in ck.diagnostics if d.is_error], (index, ck.diagnostics)

    # item 7: the user is told the buffer is not saved; the new text compiles and lenses follow, no save
    await rec(client).wait(
        lambda: any("unsaved changes" in m.message for m in client.messages[messages:]), timeout=10
    )
    await rec(client).wait(lambda: rec(client).refreshes > refreshes, timeout=20)  # lenses asked again
    version = change_doc(client, uri, applied)  # the editor's didChange for the applied edit
    assert not errors(await final_diagnostics(client, uri, version))
    titles = [(lens.range.start.line, lens.command.title) for lens in await lenses(client, uri)]
    assert any(line == line0 and t.startswith("Best:") and "(current)" in t for line, t in titles), titles
    assert not any(line == line0 and t.startswith("Apply") for line, t in titles), titles


async def test_apply_writes_one_config_when_it_fits_every_shape_set(client: LanguageClient):
    path = client.ws / "attention_one.py"
    text = (client.ws / "attention.py").read_text().replace("def attention(", "def attention_one(")
    path.write_text(text)
    uri = open_doc(client, path, text)
    await final_diagnostics(client, uri, 1)
    store_best(client, text, 0, PIPELINE, 1.0e-3, "attention_one")
    line0 = text[: text.index("# helion: args(q=bf16[8, 32, 8192")].count("\n")
    lens = await apply_lens(client, uri, line0)
    assert lens.command.title == "Apply"
    assert (await run(client, lens))["applied"] is True
    applied = rec(client).texts[uri]
    assert "configs=" not in applied and format_config(Config(PIPELINE), quote='"') in applied


async def test_apply_writes_each_sets_own_best_when_they_differ(client: LanguageClient):
    path = client.ws / "attention_two.py"
    text = (client.ws / "attention.py").read_text().replace("def attention(", "def attention_two(")
    path.write_text(text)
    uri = open_doc(client, path, text)
    await final_diagnostics(client, uri, 1)
    store_best(client, text, 0, PIPELINE, 1.0e-3, "attention_two")
    store_best(client, text, 1, PIPELINE_32K, 4.0e-3, "attention_two")
    line1 = text[: text.index("# helion: args(q=bf16[8, 32, 32768")].count("\n")
    lens = await apply_lens(client, uri, line1, "Apply (configs=[…] per shape set)")
    assert (await run(client, lens))["applied"] is True
    applied = rec(client).texts[uri]
    written = compiler.load(applied).kernels["attention_two"].decorator_configs
    assert written == [Config(PIPELINE), Config(PIPELINE_32K)], applied
