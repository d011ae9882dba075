"""The server keeps serving through garbage input, unknown methods, a broken store and a killed worker."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest
import pytest_lsp
from conftest import child_pythonpath
from lsprotocol import types
from pygls.exceptions import JsonRpcMethodNotFound
from pytest_lsp import LanguageClient
from test_ls_support import (
    SERVER,
    change_doc,
    end_session,
    final_diagnostics,
    make_workspace,
    open_doc,
    rec,
    request,
    save_doc,
    server_config,
    stage_diagnostics,
    start,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def frame(payload: dict | bytes) -> bytes:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


async def read_message(stdout: asyncio.StreamReader) -> dict:
    length = 0
    while True:
        line = await stdout.readline()
        if not line:
            raise EOFError("server closed stdout")
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
        elif line in (b"\r\n", b"\n") and length:
            return json.loads(await stdout.readexactly(length))


async def response_to(stdout: asyncio.StreamReader, msg_id: int) -> dict:
    while True:
        msg = await asyncio.wait_for(read_message(stdout), 60)
        if msg.get("id") == msg_id and "method" not in msg:
            return msg


async def test_garbage_on_stdin_then_a_normal_session(tmp_path):
    proc = await asyncio.create_subprocess_exec(
        *SERVER,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": child_pythonpath()},
    )
    garbage = [
        b"hello there\r\n\r\n",
        b"\x00\xff\xfe binary junk \r\n",
        frame(b"{this is not json"),
        frame({"not": "json-rpc"}),
        frame({"jsonrpc": "2.0", "id": 99, "method": "textDocument/hover", "params": {"bogus": True}}),
        frame({"jsonrpc": "1.0", "method": "initialized"}),
    ]
    for chunk in garbage:
        proc.stdin.write(chunk)
    init = {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}
    proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
    await proc.stdin.drain()
    reply = await response_to(proc.stdout, 1)
    assert reply["result"]["serverInfo"]["name"] == "helion-ls"
    assert reply["result"]["capabilities"]["hoverProvider"]
    proc.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    proc.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "helion/noSuchThing", "params": {}}))
    assert (await response_to(proc.stdout, 2))["error"]["code"] == -32601
    proc.stdin.write(frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}))
    assert (await response_to(proc.stdout, 3)).get("result", "missing") is None
    proc.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
    await proc.stdin.drain()
    assert await asyncio.wait_for(proc.wait(), 30) == 0


@pytest_lsp.fixture(config=server_config(), scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    ws = make_workspace(tmp_path_factory.mktemp("reliability"))
    lsp_client.ws = ws
    lsp_client.store = ws.parent / "store" / "tuning.sqlite"
    await start(lsp_client, ws, libtpu=False)
    yield
    await end_session(lsp_client)


async def lens_titles(client: LanguageClient, uri: str) -> list[str]:
    found = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    return [lens.command.title for lens in found]


async def test_unknown_methods(client: LanguageClient):
    with pytest.raises(JsonRpcMethodNotFound):
        await client.protocol.send_request_async("helion/doesNotExist", {"x": 1})
    client.protocol.notify("helion/unknownNotification", {"x": 1})
    with pytest.raises(Exception, match="not defined"):
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="helion.nope", arguments=[{}])
        )
    with pytest.raises(Exception, match="expected one object argument"):
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="helion.tune", arguments=[1, 2])
        )
    assert (await request(client, "helion/stats", {}))["openDocuments"] >= 0


async def test_corrupt_and_deleted_store(client: LanguageClient):
    uri = open_doc(client, client.ws / "add.py")
    await stage_diagnostics(client, uri, 1, "front")
    assert "Tune on v7x" in await lens_titles(client, uri)
    client.store.write_bytes(b"this is not a sqlite database" * 100)
    for name in ("tuning.sqlite-wal", "tuning.sqlite-shm"):
        (client.store.parent / name).unlink(missing_ok=True)
    await asyncio.sleep(0.5)
    assert "Tune on v7x" in await lens_titles(client, uri)
    moved_aside = [p.name for p in client.store.parent.iterdir() if ".corrupt-" in p.name]
    assert moved_aside, list(client.store.parent.iterdir())
    for p in client.store.parent.iterdir():
        p.unlink()
    await asyncio.sleep(0.5)
    assert "Tune on v7x" in await lens_titles(client, uri)
    assert (await request(client, "helion/stats", {}))["openDocuments"] >= 1


async def test_killed_check_worker_is_one_warning_then_recovers(client: LanguageClient):
    path = client.ws / "attention.py"
    text = path.read_text()
    uri = open_doc(client, path, text)
    await stage_diagnostics(client, uri, 1, "front")
    pid = None
    for _ in range(600):  # wait until the worker is lowering this kernel
        stats = await request(client, "helion/stats", {})
        if (stats["checkWorkerBusy"] or {}).get("kernel") == "attention":
            pid = stats["checkWorkerPid"]
            break
        await asyncio.sleep(0.05)
    assert pid
    os.kill(pid, signal.SIGKILL)
    diags = await final_diagnostics(client, uri, 1)
    crashed = [d for d in diags if d.code == "HPL900"]
    assert len(crashed) == 1 and "check did not finish" in crashed[0].message, diags
    assert crashed[0].severity == types.DiagnosticSeverity.Warning
    # the next save starts a fresh worker and the lowering check completes
    version = change_doc(client, uri, text + "\n")
    save_doc(client, uri)
    diags = await final_diagnostics(client, uri, version)
    assert not [d for d in diags if d.code == "HPL900"], diags
    stats = await request(client, "helion/stats", {})
    assert stats["checkWorkerRestarts"] >= 1 and stats["checkWorkerPid"] != pid


async def test_server_survives_a_flood_of_requests_for_closed_documents(client: LanguageClient):
    ghost = (client.ws / "ghost.py").as_uri()
    ident = types.TextDocumentIdentifier(uri=ghost)
    calls = []
    for line in range(20):
        pos = types.Position(line=line, character=0)
        calls.append(client.text_document_hover_async(types.HoverParams(text_document=ident, position=pos)))
        calls.append(client.text_document_code_lens_async(types.CodeLensParams(text_document=ident)))
    results = await asyncio.gather(*calls)
    assert all(not r for r in results)
    assert rec(client).events is not None
    assert (
        await request(client, "helion/kernelAt", {"uri": ghost, "position": {"line": 0, "character": 0}})
        is None
    )


async def test_console_script_over_tcp(tmp_path):
    """`helion-ls --tcp HOST:PORT` serves the same protocol on a socket (for debugging)."""
    import shutil
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = shutil.which("helion-ls")
    command = [exe] if exe else SERVER[:3]
    proc = await asyncio.create_subprocess_exec(
        *command,
        "--tcp",
        f"127.0.0.1:{port}",
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": child_pythonpath()},
    )
    try:
        for _ in range(200):
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("the server never listened")
        init = {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}
        writer.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        await writer.drain()
        reply = await response_to(reader, 1)
        assert reply["result"]["serverInfo"]["name"] == "helion-ls"
        writer.close()
    finally:
        proc.kill()
        await proc.wait()
