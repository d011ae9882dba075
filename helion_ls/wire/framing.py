"""LSP message framing that resynchronises after bad input (see transport.py for why).

Light on purpose (only `json`, `re`, `logging`): the start-up handshake frames the first messages with it
before the server's heavy imports.
"""

from __future__ import annotations

import json
import logging
import re

log = logging.getLogger("helion_ls.wire.transport")

HEADER = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d{1,12})[ \t]*\r?\n", re.IGNORECASE)
HEADERS_END = re.compile(rb"\r?\n\r?\n")
MAX_HEADER = 4096  # bytes from "Content-Length:" to the blank line; more is not a header
MAX_BODY = 256 * 1024 * 1024  # the largest document is 5 MB of text; a bigger length is a broken header
OTHER_HEADERS = re.compile(rb"(?:[A-Za-z][A-Za-z0-9-]*[ \t]*:[^\r\n]*\r?\n)+")  # e.g. Content-Type first
REQUEST_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,15}|"[^"\\]{0,200}")')


class Framer:
    """Bytes in, message bodies out; never stuck on bad input.

    After a header, exactly Content-Length bytes are the body, unless they are not JSON and contain the next
    header (the declared length was too long): then the body ends where that header starts. Bytes before a
    header (stray bytes, the tail of a body shorter than its declared length) are skipped.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self.skipped = 0  # bytes dropped so far (for the log and tests)

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out: list[bytes] = []
        while (body := self._next()) is not None:
            out.append(body)
        return out

    def _skip(self, n: int) -> None:
        if n > 0 and OTHER_HEADERS.fullmatch(self._buf, 0, n):
            del self._buf[:n]  # headers before Content-Length are allowed
        elif n > 0:
            self.skipped += n
            log.warning("skipped %d bytes that are not an LSP message: %r", n, bytes(self._buf[: min(n, 60)]))
            del self._buf[:n]

    def _next(self) -> bytes | None:
        while True:
            found = HEADER.search(self._buf)
            if found is None:  # keep a tail that may be the start of a header split across reads
                self._skip(len(self._buf) - len(b"content-length:") + 1)
                return None
            self._skip(found.start())
            end = HEADERS_END.search(self._buf, 0, MAX_HEADER)
            if end is None:
                if len(self._buf) < MAX_HEADER:
                    return None  # the rest of the header has not arrived yet
                self._skip(len(b"content-length:"))
                continue
            length = LENGTH.match(self._buf, 0, end.end())
            if length is None or int(length.group(1)) > MAX_BODY:
                self._skip(end.end())
                continue
            size, start = int(length.group(1)), end.end()
            if len(self._buf) < start + size:
                return None
            body = bytes(self._buf[start : start + size])
            inner = HEADER.search(body)
            if inner is not None and not _is_json(body):
                size = inner.start()  # the declared length ran into the next message
                body = body[:size]
            del self._buf[: start + size]
            return body


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True
