"""The server's side of remembered results: `compiler.results.AnalysisCache` read as `StageResult`s of a
document's units, and written in the background.

`recall` (blocking: call it in a thread) looks up every wanted (stage, unit) at once and gives each record
a basis (`KernelSource`) to map its ranges from: the shown kernel itself when the record was computed on
the same text (moved only when it sat at another line), else the record's own text, parsed. `keep` queues
a fresh result for a writer thread, which writes what has queued up in one transaction, so the event
loop never waits for the file; `close` writes what is left. Results of failed workers are never given
here (see analysis.py): only what a compile or check found.

A document's last complete publish is kept too, under its URI, text and the settings it depends on
(`document_parts`): reopening the same text shows it again without parsing the file (early.py); and
`seen` says whether a document was ever analysed, so a file never seen costs no lookups at start.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
from collections.abc import Iterable
from typing import Any

from compiler.results import AnalysisCache, StageRecord, UnitKey

from .documents import KernelView, StageResult, Unit
from .positions import KernelSource

log = logging.getLogger(__name__)

CLOSE_WAIT = 8.0  # seconds `close` waits for queued writes (the transport allows 10 for the whole exit)


class Remembered:
    def __init__(self, cache: AnalysisCache | None):
        self.cache = cache
        self._queue: queue.SimpleQueue[StageRecord | tuple[list[str], Any] | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._lock = threading.Lock()
        self.written = 0  # records handed to the cache (for helion/stats)

    def recall(self, wanted: Iterable[tuple[str, KernelView, Unit]]) -> dict[tuple[str, UnitKey], StageResult]:
        """The remembered result of each wanted (stage, view, unit) that has one."""
        wanted = list(wanted)
        if self.cache is None or not wanted:
            return {}
        records = self.cache.get_many([(stage, unit.key) for stage, _, unit in wanted])
        out: dict[tuple[str, UnitKey], StageResult] = {}
        for stage, view, unit in wanted:
            record = records.get((stage, unit.key))
            if record is None:
                continue
            basis = _basis(record, view.source)
            if basis is None:
                continue
            out[(stage, unit.key)] = StageResult(unit.key, basis, record.diagnostics, record.compiled, record.seconds)
        return out

    def keep(self, stage: str, result: StageResult) -> None:
        """Remember a fresh result (written by a background thread)."""
        if self.cache is None:
            return
        basis = result.basis
        self._put(StageRecord(stage, result.key, result.diagnostics, basis.segment, basis.first_line,
                              result.compiled, result.seconds))

    def keep_document(self, parts: list[str], diagnostics: list[dict[str, Any]]) -> None:
        """Remember a document's complete publish (LSP JSON) under `document_parts(...)`."""
        if self.cache is not None:
            self._put((parts, {"diagnostics": diagnostics}))
            self._put((["seen", parts[1]], True))

    def document(self, parts: list[str]) -> list[dict[str, Any]] | None:
        """The remembered complete publish of this document text (blocking)."""
        found = self.cache.get_snapshot(parts) if self.cache is not None else None
        return found.get("diagnostics") if isinstance(found, dict) else None

    def seen(self, uri: str) -> bool:
        """Some text of this document was analysed before (blocking)."""
        return self.cache is not None and self.cache.get_snapshot(["seen", uri]) is True

    def _put(self, item: StageRecord | tuple[list[str], Any]) -> None:
        self._queue.put(item)
        with self._lock:
            if self._writer is None:
                self._writer = threading.Thread(target=self._write, name="helion-remember", daemon=True)
                self._writer.start()

    def forget(self, items: Iterable[tuple[str, UnitKey]]) -> None:
        """Drop remembered results a fresh compile showed to be wrong (blocking: call it in a thread)."""
        if self.cache is not None:
            self.cache.forget(items)

    def _write(self) -> None:
        assert self.cache is not None
        while True:
            batch = [self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get())
            records = [r for r in batch if isinstance(r, StageRecord)]
            snapshots = [r for r in batch if isinstance(r, tuple)]
            try:
                self.cache.put_many(records)
                self.cache.put_snapshots(snapshots)
            except Exception:  # the cache never raises on its file; a bug here must not stop the writes
                log.exception("remembering %d results failed", len(batch))
            self.written += len(records)
            if None in batch:
                return

    def close(self) -> None:
        """Write what is queued (waiting at most CLOSE_WAIT seconds), then close the file."""
        with self._lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            self._queue.put(None)
            writer.join(CLOSE_WAIT)
            if writer.is_alive():
                log.warning("results still being remembered after %.0f s; the rest is not kept", CLOSE_WAIT)
                return
        if self.cache is not None:
            self.cache.close()


def document_parts(uri: str, text: str, chip: str, libtpu: bool, encoding: str) -> list[str]:
    """What a document's published diagnostics depend on besides the environment."""
    return ["document", uri, hashlib.sha256(text.encode()).hexdigest(), chip, str(libtpu), encoding]


def _basis(record: StageRecord, shown: KernelSource) -> KernelSource | None:
    """Where the record's ranges are: the shown kernel (perhaps at another line), or its own parsed text."""
    if record.basis == shown.segment:
        return shown if record.basis_line == shown.first_line else shown.moved(record.basis_line)
    return KernelSource.from_text(record.basis, record.basis_line)
