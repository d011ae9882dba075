"""The first moments of a stdio session: `initialize` answered before the server's heavy imports.

The server needs torch (the compiler's types) and pygls, seconds of imports on a busy 2-core machine, but
an editor waits for the `initialize` answer before it shows anything. So `EarlyReader` starts reading
stdin as the process starts, answers `initialize` itself with the capabilities the full server would
give (`capabilities.json`, computed from the server's registered features by `python -m
helion_ls.handshake`; a test checks it still matches), answers `helion/stats` while the imports run
(a client may probe that the server is alive), and keeps every other message, in order, for the server.
When the server is ready, `attach(deliver)` hands over the `initialize` request (its own answer is
dropped, see transport.Protocol) and then every kept and later message body. Until then a listener
given to `watch` (early.py) sees the initialize parameters and every kept message, and may publish
through `send_early`.

Light on purpose: imports only the standard library, framing.py and file_clock.py.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from .session.file_clock import files_clock
from .wire.framing import Framer

log = logging.getLogger(__name__)

CAPABILITIES_FILE = Path(__file__).with_name("capabilities.json")
TEMPLATE_CLIENT = {"notebookDocument": {"synchronization": {}}}  # the client capabilities.json answers
ENCODINGS = ("utf-8", "utf-16", "utf-32")  # what pygls can negotiate
READ_SIZE = 64 * 1024
Deliver = Callable[[bytes | None], None]  # a message body, or None at the end of input


def initialize_result(params: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    """The `initialize` result for this client: the template (the answer to a client that states only that it
    syncs notebooks, `TEMPLATE_CLIENT`) with the parts that depend on the client's capabilities filled in as
    pygls does."""
    result = copy.deepcopy(template)
    caps = params.get("capabilities") if isinstance(params.get("capabilities"), dict) else {}
    if caps.get("notebookDocument") is None:  # notebooks are synced only with clients that say they can
        result["capabilities"].pop("notebookDocumentSync", None)
    general = caps.get("general") if isinstance(caps.get("general"), dict) else {}
    offered = general.get("positionEncodings")
    if isinstance(offered, list):
        chosen = next((e for e in offered if e in ENCODINGS), None)
        if chosen is not None:
            result["capabilities"]["positionEncoding"] = chosen
    text_document = caps.get("textDocument") if isinstance(caps.get("textDocument"), dict) else {}
    sync = text_document.get("synchronization") if isinstance(text_document.get("synchronization"), dict) else {}
    for key in ("willSave", "willSaveWaitUntil"):  # stated by the client: answered "not handled"
        if sync.get(key) is not None:
            result["capabilities"]["textDocumentSync"][key] = False
    return result


class EarlyReader:
    """Reads the client's messages from the start of the process, in its own thread."""

    def __init__(self, stdin: int, stdout: BinaryIO, template: dict[str, Any]):
        self._stdin = stdin
        self._early: Any = None  # see watch()
        self._initialize_params: dict[str, Any] = {}
        self._stdout = stdout
        self._template = template
        self._framer = Framer()
        self._lock = threading.Lock()
        self._kept: list[bytes | None] = []
        self._deliver: Deliver | None = None
        self.initialize: bytes | None = None  # the initialize request, for the server
        self.initialize_id: Any = None
        self.initialize_result: dict[str, Any] | None = None  # what was answered
        self.answered = threading.Event()  # initialize was answered (or the input ended first)
        self.answered_at: float | None = None  # when, by files_clock()

    def start(self) -> None:
        threading.Thread(target=self._run, name="helion-stdin", daemon=True).start()

    def attach(self, deliver: Deliver) -> None:
        """From now on every message body goes to `deliver` (called from the reader thread); the
        initialize request and the kept messages first, in the order they came."""
        with self._lock:
            kept, self._kept = self._kept, []
            if self.initialize is not None:
                deliver(self.initialize)
            for body in kept:
                deliver(body)
            self._deliver = deliver

    def _run(self) -> None:
        while True:
            try:
                chunk = os.read(self._stdin, READ_SIZE)
            except OSError as exc:
                log.error("cannot read stdin: %s", exc)
                chunk = b""
            with self._lock:
                for body in self._framer.feed(chunk) if chunk else []:
                    self._take(body)
                if not chunk:
                    self._take(None)
                    self.answered.set()
                    return

    def _take(self, body: bytes | None) -> None:
        if self._deliver is not None:
            self._deliver(body)
            return
        message = _json(body) if body is not None else None
        method = message.get("method") if message is not None else None
        if method == "initialize" and self.initialize is None and "id" in message:
            self.initialize, self.initialize_id = body, message["id"]
            params = message.get("params") if isinstance(message.get("params"), dict) else {}
            self._initialize_params = params
            self.initialize_result = initialize_result(params, self._template)
            self.answered_at = files_clock()
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": self.initialize_result})
            self.answered.set()
            if self._early is not None:
                self._early.configure(params, self.initialize_result)
        elif method == "helion/stats" and "id" in message:
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": {"pid": os.getpid(), "starting": True}})
        else:
            self._kept.append(body)
            if self._early is not None and message is not None:
                self._early.message(method, message.get("params"))

    def watch(self, early: Any) -> None:
        """Show `early` the initialize parameters and the kept messages (`configure(params, result)`,
        `message(method, params)`), and every message kept from now on until `attach`."""
        with self._lock:
            if self._deliver is not None:
                return
            if self.initialize_result is not None:
                early.configure(self._initialize_params, self.initialize_result)
            for body in self._kept:
                message = _json(body) if body is not None else None
                if message is not None:
                    early.message(message.get("method"), message.get("params"))
            self._early = early

    def send_early(self, payload: dict[str, Any]) -> bool:
        """Send a message of our own, unless the server has taken over the output (then False)."""
        with self._lock:
            if self._deliver is not None:
                return False
            self._send(payload)
            return True

    def _send(self, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        try:
            self._stdout.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            self._stdout.flush()
        except OSError as exc:
            log.error("cannot write to the client: %s", exc)


def _json(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def stdio_streams() -> tuple[int, BinaryIO]:
    """stdin's descriptor and a private stdout for the protocol; `print` goes to stderr from now on, so a
    stray print can never corrupt the protocol."""
    stdout = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return sys.stdin.buffer.fileno(), stdout


def load_template() -> dict[str, Any]:
    return json.loads(CAPABILITIES_FILE.read_text())


def computed_result(client: Any = None) -> dict[str, Any]:
    """What the full server answers to `initialize` from a client with these capabilities (an
    lsprotocol ClientCapabilities; None: `TEMPLATE_CLIENT`)."""
    from lsprotocol import types
    from pygls.capabilities import ServerCapabilitiesBuilder
    from pygls.protocol import default_converter

    from .server import create_server

    server = create_server()
    proto = server.protocol
    client = client if client is not None else default_converter().structure(TEMPLATE_CLIENT, types.ClientCapabilities)
    caps = ServerCapabilitiesBuilder(
        client,
        set({**proto.fm.features, **proto.fm.builtin_features}),
        proto.fm.feature_options,
        list(proto.fm.commands),
        server._text_document_sync_kind,
        server._notebook_document_sync,
        ServerCapabilitiesBuilder.choose_position_encoding(client),
    ).build()
    result = types.InitializeResult(capabilities=caps, server_info=proto.server_info)
    return proto._converter.unstructure(result)


if __name__ == "__main__":  # regenerate capabilities.json after registering or removing a feature
    CAPABILITIES_FILE.write_text(json.dumps(computed_result(), indent=2, sort_keys=True) + "\n")
    print(f"wrote {CAPABILITIES_FILE}", file=sys.stderr)
