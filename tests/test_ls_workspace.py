"""End to end: settings (initialization options, per-folder configuration, reported once) and file watching."""

from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient
from test_ls_support import (
    attr,
    change_doc,
    end_session,
    final_diagnostics,
    make_workspace,
    open_doc,
    rec,
    server_config,
    stage_diagnostics,
    start,
)

from helion_ls.workers.machine_tpu import default_chip, machine_tpu

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("workspace"))
    lsp_client.ws = ws
    await start(lsp_client, ws, libtpu=False, chip="v99", colour="blue")
    yield
    await end_session(lsp_client)


def settings_messages(client: LanguageClient) -> list[str]:
    return [m.message for m in client.messages if m.message.startswith("Helion settings:")]


async def lens_titles(client: LanguageClient, uri: str) -> list[str]:
    found = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    return [lens.command.title for lens in found]


async def reconfigure(client: LanguageClient, values: dict) -> None:
    client.set_configuration(values, section="helion", scope_uri=client.ws.as_uri())
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))


async def test_invalid_options_are_reported_once_and_replaced_by_defaults(client: LanguageClient):
    await rec(client).wait(lambda: len(settings_messages(client)) >= 2, timeout=20)
    messages = settings_messages(client)
    assert len(messages) == 2, messages
    assert any("helion.chip = 'v99' unknown chip" in m and "using the default 'auto'" in m for m in messages)
    assert any("unknown setting helion.colour ignored" in m for m in messages)
    uri = open_doc(client, client.ws / "add.py")
    await stage_diagnostics(client, uri, 1, "front")
    assert f"Tune on {default_chip()}" in await lens_titles(client, uri)  # v7x where there is no TPU
    machine = await client.protocol.send_request_async("helion/machine", {})
    assert machine.chip == machine_tpu().chip and machine.fallbackChip == "v7x"
    await reconfigure(client, {"chip": "v99"})  # the same problem again: not reported again
    await rec(client).wait(
        lambda: [p for p in rec(client).of("helion/diagnosticsStage") if attr(p, "uri") == uri][1:], 30
    )
    assert len(settings_messages(client)) == 2


async def test_folder_configuration_changes_chip_and_compile_on_change(client: LanguageClient):
    uri = (client.ws / "add.py").as_uri()
    await reconfigure(client, {"chip": "v5e", "compileOnChange": True, "debounceMs": 50})
    for _ in range(100):  # the server pulls the configuration after the notification
        if "Tune on v5e" in await lens_titles(client, uri):
            break
        await asyncio.sleep(0.1)
    assert "Tune on v5e" in await lens_titles(client, uri)
    text = (client.ws / "add.py").read_text().replace("x[tile] + y[tile]", "x[tile] + undefined_thing")
    version = change_doc(client, uri, text)  # no save: compileOnChange does it
    diags = await final_diagnostics(client, uri, version)
    assert [d.code for d in diags] == ["HPL102"]
    await reconfigure(client, {"compileOnChange": False})


async def test_a_closed_kernel_file_changed_on_disk_is_compiled(client: LanguageClient):
    path = client.ws / "new_kernel.py"
    text = (client.ws / "add.py").read_text().replace("x[tile] + y[tile]", "x[tile] + nothing_here")
    path.write_text(text)
    uri = path.as_uri()
    published = await rec(client).wait(
        lambda: [p for p in rec(client).of("diagnostics") if p.uri == uri and p.diagnostics], timeout=30
    )
    assert published[-1].version is None
    assert [d.code for d in published[-1].diagnostics] == ["HPL102"]
    path.unlink()
    await rec(client).wait(
        lambda: (
            (found := [p for p in rec(client).of("diagnostics") if p.uri == uri])
            and not found[-1].diagnostics
        ),
        timeout=30,
    )


async def test_an_open_file_changed_on_disk_is_recompiled(client: LanguageClient):
    path = client.ws / "batch_softmax.py"
    uri = open_doc(client, path)
    await final_diagnostics(client, uri, 1)
    text = path.read_text().replace("torch.exp(row - row_max)", "torch.exp(row - missing)")
    path.write_text(text)  # e.g. git checkout; the editor then reloads the buffer
    version = change_doc(client, uri, text)
    diags = await final_diagnostics(client, uri, version)
    assert [d.code for d in diags] == ["HPL102"]
    # the same kind of change made only in the editor is not compiled (compileOnChange is off)
    version = change_doc(client, uri, text.replace("missing", "missing_too"))
    with pytest.raises(TimeoutError):
        await final_diagnostics(client, uri, version, timeout=2.0)
