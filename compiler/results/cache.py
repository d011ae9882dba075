"""`AnalysisCache`: stage records in one SQLite file per user, shared by every process that analyses kernels.

Rows are keyed by `UnitKey.digest(stage)` (unit + stage + environment) and hold the encoded record, its
checksum, its size and when it was last used. Snapshots are JSON values a caller keys by parts of its own
(with the environment added), kept in the same rows and bound: the language server keeps a document's
published diagnostics under its URI and text, to show them again without parsing it. Reading verifies the checksum, decodes through the
restricted unpickler (records.py) and compares the record's own stage and key with the ones asked for;
a row that fails any of these is deleted and reported as a miss with a warning, never returned. The file
is bounded: after writes take it past `max_bytes`, the least recently used rows go until it is under 90 %.

Nothing here raises for a damaged or unusable cache: a file that is not a database is moved aside and
replaced (`SqliteFile`); a directory that cannot be written is read if the file is there and skipped if
not; every problem is logged once as a warning, and the caller sees misses and dropped writes. Callers
on an event loop should call it in a thread: reads and writes are file I/O.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from ..support.sqlite_file import SqliteFile
from .keys import UnitKey, environment
from .records import BadRecord, StageRecord, decode, encode

log = logging.getLogger(__name__)

PATH_ENV = "HELION_LS_ANALYSIS_CACHE"  # another file for the cache; "off" disables it
SIZE_ENV = "HELION_LS_ANALYSIS_CACHE_MB"  # its bound in MiB (default 256)
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
TOUCH_AFTER = 3600.0  # seconds: a read refreshes a row's last use only when it is older than this
CHUNK = 500  # keys per SELECT (SQLite's host-parameter limit is far above)

_SCHEMA = """
CREATE TABLE records (
    key TEXT PRIMARY KEY,
    stage TEXT NOT NULL,
    body BLOB NOT NULL,
    checksum TEXT NOT NULL,
    size INTEGER NOT NULL,
    used REAL NOT NULL
);
CREATE INDEX records_by_use ON records (used);
"""


class CacheError(RuntimeError):
    """The cache file cannot be used (permissions, disk full, locked for longer than busy_timeout)."""


def default_cache_path() -> Path | None:
    """`<user cache dir>/helion-ls/analysis.sqlite`, beside the tuning store; $HELION_LS_ANALYSIS_CACHE
    names another file, or "off" for none."""
    chosen = os.environ.get(PATH_ENV)
    if chosen:
        return None if chosen.lower() == "off" else Path(chosen).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("helion-ls", appauthor=False)) / "analysis.sqlite"


def _snapshot_digest(parts: list[str]) -> str:
    return hashlib.sha256(json.dumps(["snapshot", environment(), *parts]).encode()).hexdigest()


def _checksum(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=16).hexdigest()


class _File(SqliteFile):
    SCHEMA = _SCHEMA
    APPLICATION_ID = 0x484C4143  # "HLAC"
    SCHEMA_VERSION = 1
    WHAT = "analysis cache"
    ERROR = CacheError


class _ReadOnlyFile:
    """The cache in a directory this process cannot write: read as it is (immutable), never written."""

    def __init__(self, path: Path):
        self.path = path
        self._conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        app_id = self._conn.execute("PRAGMA application_id").fetchone()[0]
        if app_id != _File.APPLICATION_ID:
            raise CacheError(f"{path} is not an analysis cache")

    def _run(self, op: Any, *, write: bool) -> Any:
        if write:
            raise CacheError(f"analysis cache {self.path} is read-only")
        with self._lock:
            return op(self._conn)

    def close(self) -> None:
        self._conn.close()


class AnalysisCache:
    """Stage records by unit; thread-safe; never raises on a damaged, foreign or unusable file."""

    _warned: ClassVar[set[str]] = set()  # problems said once per process

    def __init__(self, path: str | os.PathLike[str] | None = None, *, max_bytes: int | None = None,
                 busy_timeout: float = 10.0):
        chosen = Path(path) if path is not None else default_cache_path()
        self.path = chosen
        env_mb = os.environ.get(SIZE_ENV, "")
        self.max_bytes = max_bytes or (int(env_mb) * 1024 * 1024 if env_mb.isdigit() else DEFAULT_MAX_BYTES)
        self.problem: str | None = None  # why the cache is not (fully) usable
        self._busy_timeout = busy_timeout
        self._file: _File | _ReadOnlyFile | None = None
        self._written_since_check = self.max_bytes  # check the bound after the first write
        self._opened = threading.Lock()
        self._tried = False

    # ---- opening ------------------------------------------------------------------------------------------

    def _db(self) -> _File | _ReadOnlyFile | None:
        """The open file (opened on first use: the fast path pays nothing until it reads)."""
        with self._opened:
            if not self._tried:
                self._tried = True
                self._file = self._open()
            return self._file

    def _open(self) -> _File | _ReadOnlyFile | None:
        if self.path is None:
            return None
        try:
            return _File(self.path, self._busy_timeout)
        except CacheError as exc:
            problem = str(exc)
        if self.path.is_file() and os.access(self.path, os.R_OK):
            try:
                found = _ReadOnlyFile(self.path)
            except (sqlite3.Error, CacheError) as exc:
                problem += f"; reading it as it is failed too ({exc})"
            else:
                self._say(f"{problem}; using it read-only (results found there are used, new ones are not kept)")
                return found
        self._say(f"{problem}; analysis results will not be remembered")
        return None

    def _say(self, problem: str) -> None:
        self.problem = problem
        if problem not in self._warned:
            self._warned.add(problem)
            log.warning("%s", problem)

    # ---- reading ------------------------------------------------------------------------------------------

    def get_many(self, wanted: Iterable[tuple[str, UnitKey]]) -> dict[tuple[str, UnitKey], StageRecord]:
        """The stored record of each (stage, key) that has a sound one."""
        wanted = list(dict.fromkeys(wanted))
        db = self._db() if wanted else None
        if db is None:
            return {}
        by_digest = {key.digest(stage): (stage, key) for stage, key in wanted}
        digests = list(by_digest)
        rows: list[tuple[str, bytes, str, float]] = []

        def select(conn: sqlite3.Connection) -> None:
            for i in range(0, len(digests), CHUNK):
                part = digests[i : i + CHUNK]
                marks = ",".join("?" * len(part))
                rows.extend(conn.execute(f"SELECT key, body, checksum, used FROM records WHERE key IN ({marks})",
                                         part).fetchall())

        try:
            db._run(select, write=False)
        except CacheError as exc:
            self._say(str(exc))
            return {}
        found: dict[tuple[str, UnitKey], StageRecord] = {}
        bad: list[str] = []
        stale: list[str] = []
        now = time.time()
        for digest, body, checksum, used in rows:
            stage, key = by_digest[digest]
            try:
                if _checksum(body) != checksum:
                    raise BadRecord("checksum mismatch")
                record = decode(body)
                if record.stage != stage or record.key != key:
                    raise BadRecord(f"it holds {record.stage} of {record.key}")
            except BadRecord as exc:
                log.warning("analysis cache %s: dropped a damaged %s record of %s (%s)", self.path, stage,
                            key.source_hash, exc)
                bad.append(digest)
                continue
            found[(stage, key)] = record
            if used < now - TOUCH_AFTER:
                stale.append(digest)
        if bad or stale:
            self._write(lambda c: (
                c.executemany("DELETE FROM records WHERE key = ?", [(d,) for d in bad]),
                c.executemany("UPDATE records SET used = ? WHERE key = ?", [(now, d) for d in stale]),
            ))
        return found

    # ---- writing ------------------------------------------------------------------------------------------

    def put_many(self, records: Iterable[StageRecord]) -> None:
        """Keep these records (replacing older ones of the same unit and stage)."""
        rows = []
        now = time.time()
        for record in records:
            body = encode(record)
            rows.append((record.key.digest(record.stage), record.stage, body, _checksum(body), len(body), now))
        if not rows or self._db() is None:
            return
        if self._write(lambda c: c.executemany("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?, ?, ?)", rows)):
            self._written_since_check += sum(r[4] for r in rows)
            if self._written_since_check >= self.max_bytes // 32:
                self._written_since_check = 0
                self._evict()

    def get_snapshot(self, parts: list[str]) -> Any:
        """The JSON value kept under `parts` (and this environment), or None."""
        digest = _snapshot_digest(parts)
        db = self._db()
        if db is None:
            return None
        try:
            row = db._run(lambda c: c.execute("SELECT body, checksum FROM records WHERE key = ?", (digest,)).fetchone(),
                          write=False)
        except CacheError as exc:
            self._say(str(exc))
            return None
        if row is None:
            return None
        try:
            if _checksum(row[0]) != row[1]:
                raise ValueError("checksum mismatch")
            found = json.loads(zlib.decompress(row[0]))
            if found.get("parts") != parts:
                raise ValueError("it holds another snapshot")
        except (ValueError, zlib.error, AttributeError) as exc:
            log.warning("analysis cache %s: dropped a damaged snapshot (%s)", self.path, exc)
            self._write(lambda c: c.execute("DELETE FROM records WHERE key = ?", (digest,)))
            return None
        return found.get("value")

    def put_snapshots(self, items: Iterable[tuple[list[str], Any]]) -> None:
        """Keep JSON values under their parts (replacing older ones)."""
        rows = []
        now = time.time()
        for parts, value in items:
            body = zlib.compress(json.dumps({"parts": parts, "value": value}).encode(), 1)
            rows.append((_snapshot_digest(parts), "snapshot", body, _checksum(body), len(body), now))
        if rows and self._db() is not None:
            self._write(lambda c: c.executemany("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?, ?, ?)", rows))

    def forget(self, items: Iterable[tuple[str, UnitKey]]) -> None:
        """Drop the records of these (stage, key)s (a fresh result showed them to be wrong)."""
        digests = [(key.digest(stage),) for stage, key in items]
        if digests and self._db() is not None:
            self._write(lambda c: c.executemany("DELETE FROM records WHERE key = ?", digests))

    def _evict(self) -> None:
        """Delete the least recently used rows until the file's records fit in 90 % of max_bytes."""

        def op(conn: sqlite3.Connection) -> int:
            total = conn.execute("SELECT total(size) FROM records").fetchone()[0]
            if total <= self.max_bytes:
                return 0
            excess, doomed = total - 0.9 * self.max_bytes, []
            for key, size in conn.execute("SELECT key, size FROM records ORDER BY used"):
                doomed.append((key,))
                excess -= size
                if excess <= 0:
                    break
            conn.executemany("DELETE FROM records WHERE key = ?", doomed)
            return len(doomed)

        self._write(op)

    def _write(self, op: Any) -> bool:
        db = self._db()
        if db is None:
            return False
        try:
            db._run(op, write=True)
        except CacheError as exc:
            self._say(str(exc))
            return False
        return True

    def stats(self) -> dict[str, Any]:
        """Rows and bytes kept (for benchmarks and tests)."""
        db = self._db()
        if db is None:
            return {"records": 0, "bytes": 0}
        try:
            n, size = db._run(lambda c: c.execute("SELECT count(*), total(size) FROM records").fetchone(),
                              write=False)
        except CacheError:
            return {"records": 0, "bytes": 0}
        return {"records": n, "bytes": int(size)}

    def close(self) -> None:
        with self._opened:
            if self._file is not None:
                self._file.close()
            self._file, self._tried = None, False
