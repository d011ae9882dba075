"""The server's end of the wire: message framing that resynchronises, and an answer to every request.

pygls 2.1 reads a header only when a line is exactly `Content-Length: N\\r\\n`, and drops a message it cannot
turn into LSP types without answering it. So three stray bytes before a header, or a body shorter than its
Content-Length, glue every later header to the end of some other line: the server stays up and never
answers again; and a request with out-of-range params (a hover at line -1) gets no response at all.

Here the bytes go through `Framer`, which finds the next `Content-Length:` header wherever it starts, skips
what is not a message (logged) and re-frames a body whose declared length ran into the next header. A body
that is not JSON is logged, and answered with a parse error when its request id can be read. `Protocol`
answers a request whose params do not fit the method with InvalidParams, and one that arrives after
`shutdown` with InvalidRequest. `serve` runs the loop over stdin (or one TCP connection) until the client
closes it, sends `exit`, or the process gets SIGTERM; then the server's `on_exit` stops what it started and
the process exits (no thread, child or stuck read can keep it alive).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, NoReturn

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcParseError
from pygls.io_ import StdoutWriter
from pygls.protocol import JsonRPCNotification, LanguageServerProtocol

from .framing import REQUEST_ID, Framer
from .process_end import run_and_exit

log = logging.getLogger(__name__)

READ_SIZE = 64 * 1024


@dataclass(frozen=True)
class BadRequest:
    """A request whose params do not fit its method: answered with `error`, never handled."""

    id: int | str
    method: str
    error: JsonRpcException
    jsonrpc: str = "2.0"


class Refusal(JsonRpcException):
    """A request answered with an error that describes the user's code (a kernel that does not compile),
    not a fault of the server: one info line in the log, no traceback, no error message to the client."""

    CODE = -32803  # RequestFailed
    MESSAGE = "request failed"


class Protocol(LanguageServerProtocol):
    """pygls' protocol, plus an answer for every request it would have dropped."""

    answered_early: tuple[Any, dict[str, Any]] | None = None  # (id, result) of initialize, see handshake.py

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        early = self.answered_early
        if early is not None and msg_id == early[0]:  # the handshake answered this initialize already
            self.answered_early = None
            mine = self._converter.unstructure(result) if error is None else {"error": str(error)}
            if mine != early[1]:
                log.warning("the early initialize answer differs from the server's: %s vs %s", early[1], mine)
            return
        super()._send_response(msg_id, result, error)

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        error = None if future.cancelled() else future.exception()
        if isinstance(error, Refusal):
            self._request_futures.pop(msg_id, None)
            log.info("request %s answered with an error: %s", msg_id, str(error).splitlines()[0][:300])
            self._send_response(msg_id, error=error.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            msg_id, method = data.get("id"), data.get("method")
            if isinstance(method, str) and isinstance(msg_id, int | str) and not isinstance(msg_id, bool):
                detail = str(exc.__cause__ or exc)[:300]
                return BadRequest(msg_id, method, JsonRpcInvalidParams(f"invalid params for {method}: {detail}"))
            raise

    def handle_message(self, message: Any) -> None:
        if isinstance(message, BadRequest):
            log.warning("answering %s request %r with an error: %s", message.method, message.id, message.error)
            self._send_response(message.id, None, message.error.to_response_error())
            return
        method = getattr(message, "method", None)
        if self._shutdown and method != types.EXIT and hasattr(message, "id") and method is not None:
            error = JsonRpcInvalidRequest(f"{method}: the server is shutting down")
            self._send_response(message.id, None, error.to_response_error())
            return
        super().handle_message(message)

    def notify_json(self, method: str, params: dict[str, Any]) -> None:
        """A notification whose params are already LSP JSON (published diagnostics): sent as they are."""
        self._send_data(JsonRPCNotification(method=method, params=params, jsonrpc=self.VERSION))

    def answer_unparsable(self, body: bytes, why: str) -> None:
        """A body that is not JSON: a parse error for its request, when its id can be read."""
        found = REQUEST_ID.search(body[:400])
        if found is None or b'"method"' not in body[:400]:
            return
        raw = found.group(1)
        msg_id: int | str = int(raw) if raw[:1] != b'"' else raw[1:-1].decode(errors="replace")
        self._send_response(msg_id, None, JsonRpcParseError(f"the message is not valid JSON: {why}").to_response_error())


class _Writer(StdoutWriter):
    """Writes to the client; a client that went away ends the session instead of raising in some handler."""

    def __init__(self, stream: Any, lost: Callable[[], None]):
        super().__init__(stream)
        self._lost = lost

    def write(self, data: bytes) -> None:
        try:
            super().write(data)
        except (BrokenPipeError, ConnectionError, ValueError, OSError) as exc:
            log.error("cannot write to the client (%s); ending the session", exc)
            self._lost()


class Session:
    """One client connection: bytes -> messages -> the protocol, until the end of the connection."""

    def __init__(self, server: Any, on_exit: Callable[[], Awaitable[None]]):
        self.server = server
        self.protocol: Protocol = server.protocol
        self.on_exit = on_exit
        self.framer = Framer()
        self.ended = asyncio.Event()
        self.exit_code = 0

    def end(self, code: int | None = None, why: str = "") -> None:
        if not self.ended.is_set():
            if why:
                log.info("ending the session: %s", why)
            if code is not None:
                self.exit_code = code
            self.ended.set()

    def body(self, body: bytes | None) -> None:
        """One message body already framed (None: the client closed the connection)."""
        if body is None:
            self.data(b"")
        else:
            self._dispatch(body)

    def data(self, chunk: bytes) -> None:
        """Bytes from the client (an empty chunk: the client closed the connection)."""
        if not chunk:
            # after `shutdown` the client may close instead of sending `exit`: that is a clean end
            self.end(0 if self.protocol._shutdown else 1, "the client closed the connection")
            return
        for body in self.framer.feed(chunk):
            self._dispatch(body)

    def _dispatch(self, body: bytes) -> None:
        try:
            message = json.loads(body, object_hook=self.protocol.structure_message)
        except ValueError as exc:
            log.error("a message that is not JSON (%s): %r", exc, body[:200])
            self.protocol.answer_unparsable(body, str(exc))
            return
        except Exception:
            log.exception("cannot read a message: %r", body[:200])
            return
        try:
            self.protocol.handle_message(message)
        except SystemExit as exc:  # pygls' `exit` handler
            self.end(exc.code if isinstance(exc.code, int) else 0, "the client sent exit")
        except Exception:
            log.exception("failed to handle %r", getattr(message, "method", message))

    async def run(self, start_reading: Callable[[Session], None]) -> int:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, lambda: self.end(0, "SIGTERM"))
        loop.add_signal_handler(signal.SIGINT, lambda: self.end(130, "SIGINT"))
        start_reading(self)
        await self.ended.wait()
        try:
            await asyncio.wait_for(self.on_exit(), 10)
        except Exception:
            log.exception("stopping the server's parts failed")
        return self.exit_code


async def serve_early_stdio(
    make_server: Callable[[], Awaitable[Any]], reader: Any, stdout: BinaryIO, on_exit: Callable[[Any], Awaitable[None]]
) -> int:
    """Serve the client whose `initialize` the handshake's `reader` already answered: build the server
    (`make_server`, while the reader keeps messages), replay the initialize request to it, then every
    message the reader keeps or reads. Returns the exit code; the caller ends the process in the loop
    (process_end.run_and_exit: its loop started before this module was imported, see __main__)."""
    server = await make_server()
    session = Session(server, lambda: on_exit(server))
    loop = asyncio.get_running_loop()
    server.protocol.set_writer(_Writer(stdout, lambda: loop.call_soon_threadsafe(session.end, 1, "")))
    if reader.initialize_id is not None:
        server.protocol.answered_early = (reader.initialize_id, reader.initialize_result)
        server.initialize_answered_at = reader.answered_at
    return await session.run(lambda s: reader.attach(lambda body: loop.call_soon_threadsafe(s.body, body)))


def serve_tcp(server: Any, host: str, port: int, on_exit: Callable[[], Awaitable[None]]) -> NoReturn:
    """Serve the first client that connects to host:port (for debugging), then exit the process."""

    async def main() -> int:
        session = Session(server, on_exit)
        connected = asyncio.Event()

        async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if connected.is_set():
                writer.close()
                return
            connected.set()
            server.protocol.set_writer(_Writer(_SocketStream(writer), lambda: session.end(1, "")))
            while chunk := await reader.read(READ_SIZE):
                session.data(chunk)
            session.data(b"")

        listener = await asyncio.start_server(client, host, port)
        log.info("serving on %s", ", ".join(str(s.getsockname()) for s in listener.sockets))
        try:
            return await session.run(lambda _session: None)
        finally:
            listener.close()

    run_and_exit(main())


class _SocketStream:
    """An asyncio StreamWriter with the file-like write/flush/close that StdoutWriter expects."""

    def __init__(self, writer: asyncio.StreamWriter):
        self._writer = writer

    def write(self, data: bytes) -> None:
        if self._writer.is_closing():
            raise ConnectionError("the connection is closed")
        self._writer.write(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._writer.close()
