"""The child's side of a worker process (worker_process.py is the server's): warm up, say "ready", then
answer length-prefixed pickles one at a time. Standard library only, so a worker's start pays nothing
before its own imports (asyncio is the server's)."""

from __future__ import annotations

import os
import pickle
import struct
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

HEADER = struct.Struct(">I")  # a frame: 4 bytes of big-endian length, then the pickle


def serve(handle: Callable[[Any], Any], warm_up: Callable[[], None]) -> None:
    """The child's side: `warm_up()`, "ready", then frames on stdin -> `handle(request)` -> frames on the
    original stdout. Anything else the child prints goes to stderr. `handle` turns errors into answers."""
    out: BinaryIO = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdin = sys.stdin.buffer
    warm_up()

    def send(obj: Any) -> None:
        payload = pickle.dumps(obj)
        out.write(HEADER.pack(len(payload)) + payload)
        out.flush()

    send("ready")
    while header := stdin.read(HEADER.size):
        if len(header) < HEADER.size:
            return
        (size,) = HEADER.unpack(header)
        send(handle(pickle.loads(stdin.read(size))))
