"""A language-server client at the byte level, and a probe that the server keeps answering (no tests here).

`RawServer` starts `python -m helion_ls` and speaks framed JSON-RPC itself, so a test can send what no
client library would (stray bytes, lying Content-Lengths, out-of-range params) and still match responses
to requests. `StatsWatch` asks `helion/stats` every 0.2 s for as long as a test body runs and fails the
test if one answer takes longer than the limit (1 s): the server must answer at every moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from test_ls_support import REPO, SERVER

STATS_LIMIT = 1.0  # seconds: the longest a helion/stats answer may take, at any moment of a test


def frame(payload: dict | bytes) -> bytes:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class RawServer:
    """The server as a subprocess in its own process group, with framed messages in both directions."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self.ids = itertools.count(1000)
        self.waiting: dict[Any, asyncio.Future] = {}
        self.notes: list[dict] = []
        self.changed = asyncio.Event()
        self.stderr: list[str] = []
        self.reader = asyncio.ensure_future(self._read())
        self.err_reader = asyncio.ensure_future(self._read_stderr())

    @classmethod
    async def start(cls, *extra: str, env: dict[str, str] | None = None, launcher: Sequence[str] = ()) -> RawServer:
        """`launcher`: a command that runs the server's command line (e.g. read_only.make_read_only's)."""
        proc = await asyncio.create_subprocess_exec(
            *launcher,
            *SERVER,
            *extra,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]), **(env or {})},
            start_new_session=True,
            limit=64 * 1024 * 1024,
        )
        return cls(proc)

    async def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = 0
            while True:
                line = await out.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                elif line in (b"\r\n", b"\n") and length:
                    break
            msg = json.loads(await out.readexactly(length))
            if "method" in msg and "id" in msg:  # a request from the server: answer it plainly
                result: Any = [None] * len(msg["params"]["items"]) if msg["method"] == "workspace/configuration" else None
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
            elif "method" in msg:
                self.notes.append(msg)
                self.changed.set()
            elif msg.get("id") in self.waiting:
                self.waiting.pop(msg["id"]).set_result(msg)

    async def _read_stderr(self) -> None:
        while line := await self.proc.stderr.readline():
            self.stderr = [*self.stderr[-199:], line.decode(errors="replace").rstrip()]

    def send_bytes(self, data: bytes) -> None:
        self.proc.stdin.write(data)

    def send(self, payload: dict | bytes) -> None:
        self.send_bytes(frame(payload))

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def expect(self, msg_id: Any) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self.waiting[msg_id] = fut
        return fut

    async def request(self, method: str, params: Any = None, timeout: float = 30.0) -> dict:
        """The whole response message (`result` or `error`)."""
        msg_id = next(self.ids)
        fut = self.expect(msg_id)
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        await self.proc.stdin.drain()
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self.waiting.pop(msg_id, None)

    async def initialize(self, root: Path, **options: Any) -> dict:
        params = {
            "processId": os.getpid(),
            "rootUri": root.as_uri(),
            "capabilities": {"window": {"workDoneProgress": True}},
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
            "initializationOptions": {"storePath": str(root.parent / "store.sqlite"), "chip": "v7x", **options},
        }
        reply = await self.request("initialize", params, timeout=60)
        self.notify("initialized", {})
        await self.ready()
        return reply

    async def ready(self, timeout: float = 120.0) -> None:
        """Wait until the server finished its start-up imports: until then `helion/stats` is answered by
        the start-up handshake ({"starting": true}), as soon as the busy interpreter lets it, and the
        1 s answer time that `StatsWatch` checks applies from here on."""
        deadline = time.monotonic() + timeout
        while (await self.stats(timeout)).get("starting"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server did not finish starting within {timeout} s")
            await asyncio.sleep(0.1)

    def open(self, path: Path, text: str | None = None, version: int = 1) -> str:
        uri = path.as_uri()
        text = path.read_text() if text is None else text
        doc = {"uri": uri, "languageId": "python", "version": version, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": doc})
        return uri

    def of(self, method: str) -> list[Any]:
        return [n["params"] for n in self.notes if n["method"] == method]

    async def wait(self, predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while not (value := predicate()):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"not met within {timeout} s; stderr tail: {self.stderr[-15:]}")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 0.5))
        return value

    async def final_diagnostics(self, uri: str, version: int = 1, timeout: float = 60.0) -> list[dict]:
        def final() -> bool:
            return any(
                p["uri"] == uri and p["version"] == version and p["final"] for p in self.of("helion/diagnosticsStage")
            )

        await self.wait(final, timeout)
        published = [p for p in self.of("textDocument/publishDiagnostics") if p["uri"] == uri and p.get("version") == version]
        return published[-1]["diagnostics"]

    async def stats(self, timeout: float = 30.0) -> dict:
        return (await self.request("helion/stats", {}, timeout))["result"]

    async def stop(self) -> None:
        """Kill the server's whole process group (whatever the test left running)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()
        self.reader.cancel()
        self.err_reader.cancel()


class StatsWatch:
    """`async with StatsWatch(ask):` asks for helion/stats every `every` seconds during the block and fails
    if an answer takes longer than `limit` (a slow answer is reported with when it was asked)."""

    def __init__(self, ask: Callable[[], Awaitable[Any]], limit: float = STATS_LIMIT, every: float = 0.2):
        self.ask = ask
        self.limit = limit
        self.every = every
        self.latencies: list[float] = []
        self.late: list[str] = []
        self.start = 0.0
        self._task: asyncio.Task | None = None
        self._stopping = False

    async def _run(self) -> None:
        while not self._stopping:
            asked = time.monotonic()
            try:
                await asyncio.wait_for(self.ask(), self.limit)
            except TimeoutError:
                self.late.append(f"no answer within {self.limit} s to the request made at {asked - self.start:.1f} s")
                await asyncio.sleep(self.every)
                continue
            self.latencies.append(time.monotonic() - asked)
            await asyncio.sleep(self.every)

    @property
    def worst(self) -> float:
        return max(self.latencies, default=0.0)

    async def __aenter__(self) -> StatsWatch:
        self.start = time.monotonic()
        self._task = asyncio.ensure_future(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._stopping = True  # the probe in flight still counts: wait for it
        try:
            await asyncio.wait_for(asyncio.shield(self._task), self.limit + self.every + 1)
        except TimeoutError:
            self._task.cancel()
            self.late.append("the last request was not answered")
        if exc[0] is None:
            assert not self.late, self.late
            assert self.latencies, "helion/stats was never answered"
