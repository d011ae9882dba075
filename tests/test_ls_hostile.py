"""A hostile client against the real server (issue 10): broken framing, bad params, pathological files,
the client going away mid-tuning. Every test runs under a `StatsWatch`: the server must answer helion/stats
within a second at every moment."""

from __future__ import annotations

import asyncio
import json

import pytest
import pytest_asyncio
from ls_wire import RawServer, StatsWatch

pytestmark = pytest.mark.asyncio(loop_scope="function")

KERNEL = """import helion
import helion.language as hl
import torch


# helion: args(x=f32[256, 256])
@helion.kernel(static_shapes=True)
def scale(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] * 2.0
    return out
"""


@pytest_asyncio.fixture(loop_scope="function")
async def server(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    srv = await RawServer.start()
    srv.ws = ws
    await srv.initialize(ws, libtpu=False)
    yield srv
    await srv.stop()


def hover(uri: str, line: int, character: int, msg_id: int) -> dict:
    params = {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}
    return {"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover", "params": params}


async def hover_on_kernel(srv: RawServer, uri: str) -> dict:
    return await srv.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 6, "character": 5}}
    )


# -- protocol --------------------------------------------------------------------------------------------
async def test_stray_bytes_without_a_newline_then_requests_are_answered(server):
    path = server.ws / "k.py"
    path.write_text(KERNEL)
    async with StatsWatch(server.stats):
        uri = server.open(path)
        await server.final_diagnostics(uri)
        server.send_bytes(b"xyz")  # three stray bytes glued to the next header
        reply = await hover_on_kernel(server, uri)
        assert "scale" in reply["result"]["contents"]["value"]
        server.send_bytes(b"\x00\xff")
        assert "pid" in await server.stats()


async def test_content_length_shorter_than_the_body(server):
    path = server.ws / "k.py"
    path.write_text(KERNEL)
    async with StatsWatch(server.stats):
        uri = server.open(path)
        await server.final_diagnostics(uri)
        body = json.dumps(hover(uri, 6, 5, 7)).encode()
        answered = server.expect(7)
        server.send_bytes(b"Content-Length: %d\r\n\r\n%s" % (len(body) - 10, body))  # 10 bytes too short
        error = (await asyncio.wait_for(answered, 10))["error"]
        assert error["code"] == -32700  # the cut-off request is answered, as a parse error
        reply = await hover_on_kernel(server, uri)
        assert "scale" in reply["result"]["contents"]["value"]


async def test_content_length_longer_than_the_body(server):
    async with StatsWatch(server.stats):
        body = json.dumps({"jsonrpc": "2.0", "id": 8, "method": "helion/stats", "params": {}}).encode()
        answered = server.expect(8)
        server.send_bytes(b"Content-Length: %d\r\n\r\n%s" % (len(body) + 40, body))
        reply = await server.request("helion/stats", {})  # completes the first one's declared length
        assert "pid" in reply["result"]
        assert "pid" in (await asyncio.wait_for(answered, 10))["result"]


@pytest.mark.parametrize("line", [-1, 2**31])
async def test_out_of_range_params_get_invalid_params(server, line):
    path = server.ws / "k.py"
    path.write_text(KERNEL)
    async with StatsWatch(server.stats):
        uri = server.open(path)
        answered = server.expect(9)
        server.send(hover(uri, line, 0, 9))
        error = (await asyncio.wait_for(answered, 10))["error"]
        assert error["code"] == -32602 and "textDocument/hover" in error["message"]
        largest = await server.request(
            "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 2**31 - 1, "character": 2**31 - 1}}
        )
        assert largest["result"] is None


async def test_requests_after_shutdown_are_answered_and_exit_ends_the_process(server):
    async with StatsWatch(server.stats):
        assert (await server.request("shutdown"))["result"] is None
    reply = await server.request("helion/stats", {})
    assert reply["error"]["code"] == -32600
    server.notify("exit")
    assert await asyncio.wait_for(server.proc.wait(), 10) == 0


async def test_a_body_that_is_not_json_is_skipped(server):
    async with StatsWatch(server.stats):
        server.send(b'{"jsonrpc": "2.0", "id": 11, "method": "helion/stats", "params": {')  # cut short
        server.send(b"\x00\x01\x02")
        assert "pid" in await server.stats()
