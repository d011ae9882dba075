"""Remembered diagnostics, published before the server is built.

While the server imports (pygls and its features, about half a second), the handshake's `EarlyReader`
keeps the client's messages for it. A file opened meanwhile that was analysed before has its results in
the analysis cache, and `EarlyPublisher` publishes them at once, from a thread of its own, with the
standard library, the compiler's parser and the cache only (no torch, no pygls), followed by the stage
notification when every stage is there: the same text's last complete publish when it is kept (no parse
at all), else each kernel's remembered results composed exactly as the server composes them
(compose.py) when the document was seen before (a changed file), else nothing (a file never seen costs
one lookup).
The server, once built, handles the same didOpen as always: it recalls the same results, publishes them
and compiles each kernel again to confirm them.

Nothing is published once the server has taken over the output, nor for a document changed or closed
before its turn came; nothing for a file with no remembered result (the server publishes what the parse
finds, then the compiles).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from compiler.results import STAGES

from .session.compose import compose, needs_check
from .session.documents import KernelView, ResultCache, StageResult, Unit, load_document
from .session.remembered import Remembered, document_parts
from .session.settings import CLIENT_ANNOUNCEMENTS, Settings, parse_settings
from .wire.lsp_json import UTF16

log = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], bool]  # a JSON-RPC message to the client; False once the server owns stdout


class EarlyPublisher:
    def __init__(self, remembered: Remembered, send: Send):
        self.remembered = remembered
        self._send = send
        self._queue: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self._stale: set[str] = set()  # documents changed or closed after they were opened
        self._thread: threading.Thread | None = None
        self.settings = Settings()
        self.encoding = UTF16
        self.published: list[str] = []  # URIs published (for tests and the log)

    def configure(self, params: dict[str, Any], result: dict[str, Any]) -> None:
        """Chip and libtpu from the client's initializationOptions; the negotiated position encoding."""
        options = params.get("initializationOptions")
        if isinstance(options, dict):
            self.settings, _ = parse_settings({k: v for k, v in options.items() if k not in CLIENT_ANNOUNCEMENTS})
        self.encoding = result.get("capabilities", {}).get("positionEncoding") or UTF16

    def message(self, method: str | None, params: Any) -> None:
        """A client message the server will handle later (called by the reader, in its thread)."""
        if not isinstance(params, dict) or not isinstance(params.get("textDocument"), dict):
            return
        uri = params["textDocument"].get("uri")
        if method == "textDocument/didOpen" and isinstance(uri, str):
            self._stale.discard(uri)
            self._queue.put(params["textDocument"])
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="helion-early", daemon=True)
                self._thread.start()
        elif method in ("textDocument/didChange", "textDocument/didClose") and isinstance(uri, str):
            self._stale.add(uri)

    def _run(self) -> None:
        while True:
            doc = self._queue.get()
            try:
                self.publish(doc)
            except Exception:  # a bug here costs the early publish, never the session
                log.exception("publishing the remembered results of %s failed", doc.get("uri"))

    def publish(self, doc: dict[str, Any]) -> None:
        uri, version, text = doc.get("uri"), doc.get("version"), doc.get("text")
        if not isinstance(uri, str) or not isinstance(text, str) or uri in self._stale:
            return
        chip, libtpu = self.settings.chip, self.settings.libtpu
        version = version if isinstance(version, int) else None
        kept = self.remembered.document(document_parts(uri, text, chip, libtpu, self.encoding))
        if kept is not None:
            self._publish(uri, version, kept, "front", True, "its last complete publish")
            return
        if not self.remembered.seen(uri):
            return
        loaded = load_document(uri, version, text, chip)
        units = [(view, unit) for view in loaded.kernels.values() for unit in view.units]
        stages = STAGES if libtpu else STAGES[:2]
        found = self.remembered.recall([(stage, view, unit) for view, unit in units for stage in stages])
        if not found:
            return
        cache = ResultCache()
        for (stage, _key), result in found.items():
            cache.put(stage, result)

        def lookup(stage: str, view: KernelView, unit: Unit) -> tuple[StageResult, Any] | None:
            return cache.get(stage, unit.key, view)

        stage = final = None
        if all(lookup("front", view, unit) is not None for view, unit in units):
            pending = [s for s in stages[1:] if any(needs_check(s, lookup, view, unit, ahead=True) for view, unit in units)]
            stage, final = "front", not pending
        self._publish(uri, version, compose(loaded, lookup, self.encoding).get(uri, []), stage, final,
                      f"{len(found)} remembered results")

    def _publish(self, uri: str, version: int | None, diagnostics: list[dict[str, Any]], stage: str | None,
                 final: bool | None, what: str) -> None:
        params = {"uri": uri, "diagnostics": diagnostics} | ({"version": version} if version is not None else {})
        if uri in self._stale or not self._send(_notification("textDocument/publishDiagnostics", params)):
            return
        self.published.append(uri)
        if stage is not None:
            self._send(_notification("helion/diagnosticsStage",
                                     {"uri": uri, "version": version, "stage": stage, "final": final}))
        log.info("published %s of %s before the server was ready", what, uri)


def _notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}
