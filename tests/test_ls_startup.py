"""The start of a session: `initialize` is answered by the handshake, before the server's heavy imports,
with exactly what the full server would answer; the server then serves everything the client sent."""

from __future__ import annotations

import json

import pytest
import pytest_lsp
from ls_wire import RawServer
from lsprotocol import types
from pygls.protocol import default_converter

from helion_ls.handshake import CAPABILITIES_FILE, computed_result, initialize_result, load_template

ADD = """import helion
import helion.language as hl
import torch


# helion: args(x=f32[256, 256], y=f32[256, 256])
@helion.kernel
def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out
"""

CLIENTS = {
    "none": types.ClientCapabilities(),
    "vscode": pytest_lsp.client_capabilities("visual-studio-code"),
    "neovim": pytest_lsp.client_capabilities("neovim"),
    "notebooks": types.ClientCapabilities(
        notebook_document=types.NotebookDocumentClientCapabilities(
            synchronization=types.NotebookDocumentSyncClientCapabilities(dynamic_registration=True)
        )
    ),
    "utf-8 first": types.ClientCapabilities(
        general=types.GeneralClientCapabilities(position_encodings=["utf-8", "utf-16"]),
        text_document=types.TextDocumentClientCapabilities(
            synchronization=types.TextDocumentSyncClientCapabilities(will_save=True, will_save_wait_until=False)
        ),
    ),
}


def test_capabilities_file_is_what_the_server_registers():
    """Fails after a feature is added or removed until `python -m helion_ls.handshake` is run."""
    assert json.loads(CAPABILITIES_FILE.read_text()) == computed_result()


@pytest.mark.parametrize("client", list(CLIENTS))
def test_early_answer_equals_the_servers_for_each_client(client: str):
    caps = CLIENTS[client]
    params = {"processId": None, "rootUri": None, "capabilities": default_converter().unstructure(caps)}
    assert initialize_result(params, load_template()) == computed_result(caps)


@pytest.mark.asyncio(loop_scope="function")
async def test_initialize_is_answered_before_the_server_is_built_then_everything_is_served(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "add.py").write_text(ADD)
    server = await RawServer.start()
    try:
        params = {
            "processId": None,
            "rootUri": ws.as_uri(),
            "capabilities": {"general": {"positionEncodings": ["utf-32"]}},
            "initializationOptions": {"storePath": str(tmp_path / "store.sqlite"), "libtpu": False},
        }
        init = server.expect(1)
        server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        reply = await init
        assert reply["result"] == initialize_result(params, load_template())
        assert reply["result"]["capabilities"]["positionEncoding"] == "utf-32"
        early = await server.stats()  # asked at once: the server's imports are still running
        assert early.get("starting") is True, early
        server.notify("initialized", {})
        uri = server.open(ws / "add.py")
        assert await server.final_diagnostics(uri) == []
        hover_reply = await server.request(
            "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 7, "character": 5}}
        )
        assert "**add**" in hover_reply["result"]["contents"]["value"]
        stats = await server.stats()
        assert "starting" not in stats and stats["openDocuments"] == 1
        assert not [line for line in server.stderr if "differs" in line or "Traceback" in line], server.stderr
        shutdown = await server.request("shutdown", None)
        assert "error" not in shutdown
    finally:
        await server.stop()
