"""End to end, on a kernel written as upstream Helion writes them (bare `@helion.kernel`, two shape sets):
*Apply* keeps the tuned result attached and the other shape set's config, writes only configs upstream
Helion accepts and we do not call illegal, is offered only for a real gain, a tuned pick over the default
VMEM says why in its hint, and a Best lens never outlives the shapes or chip it was tuned for.
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from conftest import MORE_KERNELS
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
from upstream_config import problems

import compiler
from compiler.tune.keys import TrialKey, shape_key
from compiler.tune.store import TuningStore

pytestmark = pytest.mark.asyncio(loop_scope="module")
RMS = (MORE_KERNELS / "rms_norm_sets.py").read_text()
FITS = {"vmem_verdict": "fits"}
OVER = {"vmem_verdict": "over_default_limit"}


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("sets"))
    lsp_client.ws = ws
    lsp_client.store = ws.parent / "store" / "tuning.sqlite"
    await start(lsp_client, ws, libtpu=False, executor="inline", tuneMaxEvals=6)
    yield
    await end_session(lsp_client)


def kernel_text(name: str, decorator: str = "@helion.kernel") -> str:
    return RMS.replace("def rms_norm_rows(", f"def {name}(").replace("@helion.kernel\n", decorator + "\n")


def record(client: LanguageClient, text: str, name: str, index: int, config: dict, seconds: float, metrics: dict):
    kernel = compiler.load(text).kernels[name]
    key = TrialKey(kernel.source_hash, shape_key(kernel.shape_sets[index]), "v7x", "model")
    with TuningStore(client.store) as store:
        store.record_trial(key, config, seconds, "ok", metrics)


async def lenses(client: LanguageClient, uri: str) -> list[types.CodeLens]:
    found = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    return list(found or [])


def set_line(text: str, index: int) -> int:
    lines = text.splitlines()
    return [i for i, line in enumerate(lines) if line.startswith("# helion: args(")][index]


async def titles_on(client: LanguageClient, uri: str, line: int, until=None, timeout: float = 20) -> list[str]:
    """The lens titles on `line`, once `until(titles)` holds (the store is read again when it changes)."""
    titles: list[str] = []
    for _ in range(int(timeout / 0.2)):
        titles = [lens.command.title for lens in await lenses(client, uri) if lens.range.start.line == line]
        if until is None or until(titles):
            return titles
        await asyncio.sleep(0.2)
    raise AssertionError(f"lenses on line {line}: {titles}")


async def apply_on(client: LanguageClient, uri: str, line: int, title: str = "Apply") -> tuple[str, str]:
    """Click the Apply lens of the shape set on `line` once it reads `title` (its plan is worked out after
    the lens first shows): (its title, the text after the edit)."""
    await titles_on(client, uri, line, lambda ts: title in ts)
    lens = next(lens for lens in await lenses(client, uri)
                if lens.range.start.line == line and lens.command.title == title)
    out = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=lens.command.command, arguments=lens.command.arguments)
    )
    assert out["applied"] is True
    return lens.command.title, rec(client).texts[uri]


def written(text: str, name: str) -> list[compiler.Config]:
    kernel = compiler.load(text).kernels[name]
    return kernel.decorator_configs or [kernel.decorator_config]


def assert_clean_and_upstream(text: str, name: str) -> None:
    """Every config written compiles cleanly for its shape set (nothing we call illegal) and is one upstream
    Helion's Config accepts."""
    kernel = compiler.load(text).kernels[name]
    for index in range(len(kernel.shape_sets)):
        config = kernel.config_for(index)
        assert not problems(config, tensor_args=2), config
        ck = kernel.compile(shape_set=index, chip="v7x")
        assert not [d for d in ck.diagnostics if d.is_error or d.code.startswith("HPL2")], (index, ck.diagnostics)


async def test_apply_keeps_the_result_and_then_both_shape_sets(client: LanguageClient):
    name = "rms_apply"
    text = kernel_text(name)
    path = client.ws / "rms_apply.py"
    path.write_text(text)
    uri = open_doc(client, path, text)
    await final_diagnostics(client, uri, 1)
    line0, line1 = set_line(text, 0), set_line(text, 1)
    record(client, text, name, 0, {"block_sizes": [256]}, 1.5e-4, FITS)  # the default config
    record(client, text, name, 0, {"block_sizes": [128]}, 1.0e-4, FITS)

    title, applied = await apply_on(client, uri, line0)
    assert title == "Apply" and "@helion.kernel(config=helion.Config(block_sizes=[128]))" in applied, applied
    version = change_doc(client, uri, applied)
    await final_diagnostics(client, uri, version)
    after = await titles_on(client, uri, line0, lambda ts: any("(current)" in t for t in ts))
    assert any(t.startswith("Best: bs=[128]") and "(current)" in t for t in after), after
    assert not any(t.startswith("Apply") for t in after), after

    record(client, applied, name, 1, {"block_sizes": [128]}, 3.0e-4, FITS)
    record(client, applied, name, 1, {"block_sizes": [64]}, 2.0e-4, FITS)
    title, both = await apply_on(client, uri, line1, "Apply (configs=[…] per shape set)")
    assert written(both, name) == [compiler.Config(block_sizes=[128]), compiler.Config(block_sizes=[64])], both
    assert_clean_and_upstream(both, name)
    version = change_doc(client, uri, both)
    await final_diagnostics(client, uri, version)
    for line in (line0, line1):
        shown = await titles_on(client, uri, line, lambda ts: any("(current)" in t for t in ts))
        assert not any(t.startswith("Apply") for t in shown), shown


async def test_apply_never_keeps_a_config_we_call_illegal(client: LanguageClient):
    name = "rms_illegal"
    configs = "configs=[helion.Config(block_sizes=[64]), helion.Config(block_sizes=[100])]"
    text = kernel_text(name, f"@helion.kernel({configs})")
    path = client.ws / "rms_illegal.py"
    path.write_text(text)
    uri = open_doc(client, path, text)
    diags = await final_diagnostics(client, uri, 1)
    assert any(d.code == "HPL205" for d in diags), diags  # shape set 1's block 100 is raised to 104
    record(client, text, name, 0, {"block_sizes": [128]}, 1.0e-4, FITS)
    _, applied = await apply_on(client, client.ws.joinpath("rms_illegal.py").as_uri(), set_line(text, 0))
    assert written(applied, name) == [compiler.Config(block_sizes=[128])], applied
    assert "configs=" not in applied
    assert_clean_and_upstream(applied, name)


async def test_apply_is_offered_only_for_a_gain_of_two_percent(client: LanguageClient):
    name = "rms_gain"
    text = kernel_text(name)
    path = client.ws / "rms_gain.py"
    path.write_text(text)
    uri = open_doc(client, path, text)
    await final_diagnostics(client, uri, 1)
    record(client, text, name, 0, {"block_sizes": [256]}, 1.01e-4, FITS)  # the default: 1 % slower
    record(client, text, name, 0, {"block_sizes": [128]}, 1.00e-4, FITS)
    line0 = set_line(text, 0)
    shown = await titles_on(client, uri, line0, lambda ts: any(t.startswith("Best:") for t in ts))
    assert any("(+1.0 %: too little to apply)" in t for t in shown), shown
    assert not any(t.startswith("Apply") for t in shown), shown


async def test_a_tuned_pick_over_the_default_vmem_says_why_instead_of_warning(client: LanguageClient):
    name = "rms_big"
    text = kernel_text(name)
    path = client.ws / "rms_big.py"
    path.write_text(text)
    uri = open_doc(client, path, text)
    await final_diagnostics(client, uri, 1)
    record(client, text, name, 0, {"block_sizes": [512]}, 1.0e-4, FITS)
    record(client, text, name, 0, {"block_sizes": [1024]}, 0.8e-4, OVER)  # 25 % faster: worth the VMEM
    _, applied = await apply_on(client, uri, set_line(text, 0), "Apply (configs=[…] per shape set)")
    # 1024 rows are out of VMEM at 8192 columns: shape set 1 keeps the config it compiles with
    assert written(applied, name) == [compiler.Config(block_sizes=[1024]), compiler.Config(block_sizes=[256])]
    version = change_doc(client, uri, applied)
    await final_diagnostics(client, uri, version)
    await titles_on(client, uri, set_line(text, 0), lambda ts: any("(current)" in t for t in ts))

    def hpl301():
        found = [d for d in client.diagnostics.get(uri, []) if d.code == "HPL301"]
        return found if found and "Tuning picked it" in found[0].message else None

    (hint,) = await rec(client).wait(hpl301, timeout=20)
    assert "25% faster than the best config within the default limit (bs=[512]" in hint.message, hint.message
    assert hint.severity == types.DiagnosticSeverity.Information
    assert not any(d.code == "HPL501" for d in client.diagnostics[uri])


async def test_a_best_lens_belongs_to_its_shapes_and_chip(client: LanguageClient):
    name = "rms_retune"
    text = kernel_text(name)
    path = client.ws / "rms_retune.py"
    path.write_text(text)
    uri = open_doc(client, path, text)
    await final_diagnostics(client, uri, 1)
    line1 = set_line(text, 1)
    tune = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="helion.tune", arguments=[{"uri": uri, "kernel": name, "shapeSet": 1}]))
    assert tune["jobs"]
    best = await titles_on(client, uri, line1, lambda ts: any(t.startswith("Best:") for t in ts), timeout=300)
    figure = next(t for t in best if t.startswith("Best:")).split(" [")[0]

    wider = text.replace("x=bf16[1024, 8192], weight=bf16[8192]", "x=bf16[1024, 16384], weight=bf16[16384]")
    change_doc(client, uri, wider)  # an edit (no save): the lenses follow the parsed text
    shown = await titles_on(client, uri, line1, lambda ts: any(t.startswith("Retune") for t in ts))
    assert "Retune on v7x (shapes changed)" in shown and not any(figure in t for t in shown), shown

    change_doc(client, uri, text)  # back to the tuned shapes: the stored result is theirs
    await titles_on(client, uri, line1, lambda ts: any(t.startswith("Best:") for t in ts))
    client.set_configuration({"chip": "v6e"}, section="helion", scope_uri=client.ws.as_uri())
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    try:
        shown = await titles_on(client, uri, line1, lambda ts: any(t.startswith("Retune") for t in ts))
        assert "Retune on v6e (chip changed)" in shown and not any(t.startswith("Best:") for t in shown), shown
    finally:
        client.set_configuration({"chip": "v7x"}, section="helion", scope_uri=client.ws.as_uri())
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
