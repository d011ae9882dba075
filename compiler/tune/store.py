"""The tuning results store: one SQLite file shared by the CLI, the language server and its workers.

(A little over 500 lines on purpose: writing, reading and recovering from damage share one connection and
one transaction discipline, and read best side by side.)

Every trial is kept (not only the best), so the editor can plot a tuning run and a later run can start
from what is known. Rows are keyed by `TrialKey` (source hash, shape key, chip, evaluator, compiler
version); a key with another compiler version is simply never matched.

Several processes write at once: the file is in WAL mode, every write is one short `BEGIN IMMEDIATE`
transaction, and SQLITE_BUSY is retried with backoff. The store is a cache, so damage never reaches the
caller: a file that is not a database, a database of another program or schema version, or one that
turns out corrupt mid-use is renamed to `<name>.corrupt-<UTC time>` (with its -wal/-shm) and a fresh
store takes its place; a file deleted or replaced while open is noticed before the next statement.
Opening and recovery are serialised between processes by an advisory lock on `<name>.lock`, so two
processes never rename each other's fresh file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import platformdirs

from .keys import TrialKey

log = logging.getLogger(__name__)

APPLICATION_ID = 0x484C5453  # "HLTS" in the SQLite header: marks the file as ours
SCHEMA_VERSION = 1  # PRAGMA user_version; a different value is treated as a foreign store
VERDICTS = ("ok", "pruned", "failed", "wrong")
EVALUATOR_PREFERENCE = ("tpu", "compile", "model")  # best() without an evaluator: most trustworthy first

_SCHEMA = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    source_hash TEXT NOT NULL,
    shape_key TEXT NOT NULL,
    chip TEXT NOT NULL,
    evaluator TEXT NOT NULL,
    compiler_version TEXT NOT NULL,
    started REAL NOT NULL,
    finished REAL,
    status TEXT NOT NULL,
    meta TEXT NOT NULL
);
CREATE INDEX runs_by_key ON runs (source_hash, shape_key, chip, compiler_version, started);
CREATE TABLE trials (
    id INTEGER PRIMARY KEY,
    source_hash TEXT NOT NULL,
    shape_key TEXT NOT NULL,
    chip TEXT NOT NULL,
    evaluator TEXT NOT NULL,
    compiler_version TEXT NOT NULL,
    config TEXT NOT NULL,
    seconds REAL,
    verdict TEXT NOT NULL CHECK (verdict IN ('ok', 'pruned', 'failed', 'wrong')),
    metrics TEXT NOT NULL,
    run_id TEXT,
    timestamp REAL NOT NULL
);
CREATE INDEX trials_by_key ON trials (source_hash, shape_key, chip, compiler_version, evaluator, timestamp);
CREATE INDEX trials_ok ON trials (source_hash, shape_key, chip, compiler_version, evaluator, seconds)
    WHERE verdict = 'ok' AND seconds IS NOT NULL;
"""

# Primary SQLite result codes (https://sqlite.org/rescode.html).
_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_READONLY_DBMOVED = 1032  # the file was unlinked or renamed under an open connection

T = TypeVar("T")


class StoreError(RuntimeError):
    """The store cannot be used (permissions, disk full, locked for longer than busy_timeout)."""


class _ForeignStore(Exception):
    """A valid SQLite file that is not a tuning store of this schema version."""


@dataclass(frozen=True)
class Trial:
    config: dict[str, Any]
    seconds: float | None
    verdict: str
    metrics: dict[str, Any]
    evaluator: str
    timestamp: float
    run_id: str | None = None


@dataclass(frozen=True)
class Run:
    run_id: str
    key: TrialKey
    started: float
    finished: float | None
    status: str  # "running" until finish_run
    meta: dict[str, Any] = field(default_factory=dict)


def default_store_path() -> Path:
    """`<user cache dir>/helion-ls/tuning.sqlite` (e.g. ~/.cache/helion-ls/tuning.sqlite on Linux)."""
    return Path(platformdirs.user_cache_dir("helion-ls", appauthor=False)) / "tuning.sqlite"


def _dumps(value: Any) -> str:
    # numpy / torch scalars have .item(); anything else unknown is kept as its text
    return json.dumps(value, sort_keys=True, default=lambda o: o.item() if hasattr(o, "item") else str(o))


def _error_code(exc: sqlite3.Error) -> int:
    return getattr(exc, "sqlite_errorcode", -1)


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def _key_where(key: TrialKey) -> tuple[str, list[Any]]:
    where = "source_hash = ? AND shape_key = ? AND chip = ? AND compiler_version = ?"
    params: list[Any] = [key.source_hash, key.shape_key, key.chip, key.compiler_version]
    if key.evaluator is not None:
        where += " AND evaluator = ?"
        params.append(key.evaluator)
    return where, params


def _trial(row: sqlite3.Row) -> Trial:
    return Trial(
        config=json.loads(row["config"]),
        seconds=row["seconds"],
        verdict=row["verdict"],
        metrics=json.loads(row["metrics"]),
        evaluator=row["evaluator"],
        timestamp=row["timestamp"],
        run_id=row["run_id"],
    )


def _reopen(path: str, busy_timeout: float) -> TuningStore:
    return TuningStore(path, busy_timeout=busy_timeout)


class TuningStore:
    """A handle on the store file; thread-safe. Pickles as its path (reopened in the receiving process)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, busy_timeout: float = 30.0):
        self.path = Path(path) if path is not None else default_store_path()
        self.busy_timeout = busy_timeout
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None
        self._generation = 0  # bumped on every (re)open, part of data_version()
        with self._lock:
            self._open(bad_file=None)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_reopen, (str(self.path), self.busy_timeout))

    # ---- opening and recovery -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _process_lock(self) -> Iterator[None]:
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlite3.Row
        return conn

    def _open(self, bad_file: tuple[int, int] | None) -> None:
        """Connect, moving aside the file if it is `bad_file` or turns out not to be a usable store."""
        self._close_connection()
        if self.path.is_dir():
            raise StoreError(f"cannot open tuning store {self.path}: it is a directory")
        blocker = next((p for p in self.path.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise StoreError(f"cannot open tuning store {self.path}: {blocker} is a file, not a directory")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._process_lock():
                if bad_file is not None and _file_id(self.path) == bad_file:
                    self._move_aside("it is corrupt")
                if not self.path.exists():
                    self._remove_orphans()
                conn = self._connect()
                try:
                    self._check_or_init(conn)
                except (_ForeignStore, sqlite3.DatabaseError) as exc:
                    conn.close()
                    if isinstance(exc, sqlite3.DatabaseError) and _error_code(exc) not in _CORRUPT_CODES:
                        raise
                    self._move_aside(str(exc) or type(exc).__name__)
                    conn = self._connect()
                    self._check_or_init(conn)
                file = _file_id(self.path)  # under the lock: the file this connection has open
        except (OSError, sqlite3.Error, _ForeignStore) as exc:
            raise StoreError(f"cannot open tuning store {self.path}: {exc}") from exc
        self._conn = conn
        self._file = file
        self._generation += 1

    def _check_or_init(self, conn: sqlite3.Connection) -> None:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if (app_id, version) != (APPLICATION_ID, SCHEMA_VERSION):
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if app_id != 0 or version != 0 or tables != 0:
                raise _ForeignStore(
                    f"not a helion-ls tuning store of schema {SCHEMA_VERSION} "
                    f"(application_id={app_id:#x}, user_version={version}, {tables} schema objects)"
                )
            # An empty database (SQLite itself creates files with zero length): make it ours.
            conn.executescript(
                f"BEGIN IMMEDIATE; {_SCHEMA} PRAGMA application_id = {APPLICATION_ID}; "
                f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
            )
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            log.warning("tuning store %s: WAL mode unavailable (journal_mode=%s)", self.path, mode)
        conn.execute("PRAGMA synchronous = NORMAL")  # durable enough for a cache, and much faster in WAL

    def _move_aside(self, reason: str) -> None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while target.exists():
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
            n += 1
        with contextlib.suppress(FileNotFoundError):
            os.rename(self.path, target)
        for suffix in ("-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.rename(f"{self.path}{suffix}", f"{target}{suffix}")
        log.warning(
            "tuning store %s is unusable (%s); moved it to %s and started a fresh one",
            self.path,
            reason,
            target,
        )

    def _remove_orphans(self) -> None:
        """Delete the -wal/-shm of a database file that was deleted (maybe still open in other processes).

        A new database would otherwise adopt them: SQLite replays a WAL it finds beside the file, and the
        -shm may still be mapped by a process using the deleted file. Those processes keep their open
        handles (and, because the file moved, never checkpoint into or delete by name on close).
        """
        for suffix in ("-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                continue
            log.warning("tuning store %s: removed %s left by the deleted database", self.path, suffix)

    def _close_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or _file_id(self.path) != self._file:
            if self._conn is not None:
                log.warning("tuning store %s was deleted or replaced while open; reopening", self.path)
            self._open(bad_file=None)
        assert self._conn is not None
        return self._conn

    def _run(self, op: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        """Run `op` in one transaction; retry on BUSY, recover once from corruption or a vanished file."""
        deadline = time.monotonic() + self.busy_timeout
        delay = 0.005
        recovered = False
        with self._lock:
            while True:
                conn = self._connection()
                try:
                    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                    result = op(conn)
                    conn.execute("COMMIT")
                    return result
                except sqlite3.DatabaseError as exc:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    code = _error_code(exc)
                    if code & 0xFF in _BUSY_CODES and time.monotonic() < deadline:
                        time.sleep(delay * (1 + random.random()))
                        delay = min(delay * 2, 0.25)
                        continue
                    if recovered:
                        raise StoreError(f"tuning store {self.path}: {exc}") from exc
                    if code & 0xFF in _CORRUPT_CODES:
                        recovered = True
                        log.warning("tuning store %s: %s", self.path, exc)
                        self._open(bad_file=self._file)
                        continue
                    if code == _READONLY_DBMOVED or _file_id(self.path) != self._file:
                        recovered = True
                        continue  # _connection() reopens
                    raise StoreError(f"tuning store {self.path}: {exc}") from exc

    # ---- writing ------------------------------------------------------------------------------------------

    def start_run(self, key: TrialKey, meta: Mapping[str, Any] | None = None) -> str:
        """Record the start of a tuning run (one search for one key); returns its id for record_trial."""
        if key.evaluator is None:
            raise ValueError("start_run needs a key with an evaluator")
        run_id = uuid.uuid4().hex
        row = (run_id, key.source_hash, key.shape_key, key.chip, key.evaluator, key.compiler_version)
        meta_json = _dumps(dict(meta or {}))
        self._run(
            lambda c: c.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, NULL, 'running', ?)",
                (*row, time.time(), meta_json),
            ),
            write=True,
        )
        return run_id

    def finish_run(self, run_id: str, status: str) -> None:
        """Mark a run finished: status is e.g. "done", "cancelled", "failed"."""
        self._run(
            lambda c: c.execute(
                "UPDATE runs SET finished = ?, status = ? WHERE run_id = ?", (time.time(), status, run_id)
            ),
            write=True,
        )

    def record_trial(
        self,
        key: TrialKey,
        config: Mapping[str, Any],
        seconds: float | None,
        verdict: str,
        metrics: Mapping[str, Any] | None = None,
        run_id: str | None = None,
    ) -> None:
        """Keep one evaluated (or pruned / failed / wrong) config. `seconds` counts only when verdict is "ok"."""
        if key.evaluator is None:
            raise ValueError("record_trial needs a key with an evaluator")
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, not {verdict!r}")
        row = (
            key.source_hash,
            key.shape_key,
            key.chip,
            key.evaluator,
            key.compiler_version,
            _dumps(dict(config)),
            None if seconds is None else float(seconds),
            verdict,
            _dumps(dict(metrics or {})),
            run_id,
            time.time(),
        )
        self._run(
            lambda c: c.execute(
                "INSERT INTO trials (source_hash, shape_key, chip, evaluator, compiler_version, config, "
                "seconds, verdict, metrics, run_id, timestamp) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            ),
            write=True,
        )

    def record_trials(
        self,
        key: TrialKey,
        trials: Sequence[tuple[Mapping[str, Any], float | None, str, Mapping[str, Any] | None]],
        run_id: str | None = None,
    ) -> None:
        """Keep many trials, (config, seconds, verdict, metrics) each, in one transaction (a search records
        a thousand in the time one commit per trial would take for a few hundred)."""
        if key.evaluator is None:
            raise ValueError("record_trials needs a key with an evaluator")
        now = time.time()
        rows = []
        for config, seconds, verdict, metrics in trials:
            if verdict not in VERDICTS:
                raise ValueError(f"verdict must be one of {VERDICTS}, not {verdict!r}")
            rows.append((
                key.source_hash, key.shape_key, key.chip, key.evaluator, key.compiler_version,
                _dumps(dict(config)), None if seconds is None else float(seconds), verdict,
                _dumps(dict(metrics or {})), run_id, now,
            ))  # fmt: skip
        if not rows:
            return
        self._run(
            lambda c: c.executemany(
                "INSERT INTO trials (source_hash, shape_key, chip, evaluator, compiler_version, config, "
                "seconds, verdict, metrics, run_id, timestamp) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            ),
            write=True,
        )

    # ---- reading ------------------------------------------------------------------------------------------

    def best(self, key: TrialKey, evaluator: str | None = None) -> Trial | None:
        """Fastest "ok" trial for the key's kernel, shapes and chip.

        The evaluator is `evaluator`, else `key.evaluator`; when both are None the most trustworthy evaluator
        that has a result wins (tpu, then compile, then model, then any other), not the smallest number.
        """
        top = self.top(key, 1, evaluator)
        return top[0] if top else None

    def top(self, key: TrialKey, n: int, evaluator: str | None = None) -> list[Trial]:
        """The n fastest distinct configs ("ok" trials; each config's fastest trial), as best() chooses."""
        key = key.with_evaluator(evaluator or key.evaluator)
        where, params = _key_where(key)
        ok = f"{where} AND verdict = 'ok' AND seconds IS NOT NULL"

        def choose(c: sqlite3.Connection) -> str | None:
            if key.evaluator is not None:
                return key.evaluator
            for name in EVALUATOR_PREFERENCE:  # an index probe each, however many trials there are
                if c.execute(
                    f"SELECT 1 FROM trials WHERE {ok} AND evaluator = ? LIMIT 1", [*params, name]
                ).fetchone():
                    return name
            others = c.execute(f"SELECT min(evaluator) FROM trials WHERE {ok}", params).fetchone()
            return others[0]

        def op(c: sqlite3.Connection) -> list[Trial]:
            chosen = choose(c)
            if chosen is None:
                return []
            rows = c.execute(
                f"SELECT * FROM trials WHERE {ok} AND evaluator = ? ORDER BY seconds, timestamp, id",
                [*params, chosen],
            )
            out: list[Trial] = []
            seen: set[str] = set()
            for row in rows:  # lazily: stops reading after n distinct configs
                if row["config"] not in seen:
                    seen.add(row["config"])
                    out.append(_trial(row))
                    if len(out) == n:
                        break
            return out

        return self._run(op, write=False)

    def trials(self, key: TrialKey, *, run_id: str | None = None, limit: int | None = None) -> list[Trial]:
        """Every trial of the key (any evaluator when key.evaluator is None), oldest first.

        `run_id` restricts to one run; `limit` keeps the most recent ones.
        """
        where, params = _key_where(key)
        if run_id is not None:
            where += " AND run_id = ?"
            params.append(run_id)
        sql = f"SELECT * FROM trials WHERE {where} ORDER BY timestamp DESC, id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._run(lambda c: c.execute(sql, params).fetchall(), write=False)
        return [_trial(r) for r in reversed(rows)]

    def runs(self, key: TrialKey | None = None, *, limit: int | None = None) -> list[Run]:
        """Runs of the key (all runs when None; any evaluator when key.evaluator is None), oldest first."""
        where, params = _key_where(key) if key is not None else ("1", [])
        sql = f"SELECT * FROM runs WHERE {where} ORDER BY started DESC, rowid DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._run(lambda c: c.execute(sql, params).fetchall(), write=False)
        return [
            Run(
                run_id=r["run_id"],
                key=TrialKey(
                    r["source_hash"], r["shape_key"], r["chip"], r["evaluator"], r["compiler_version"]
                ),
                started=r["started"],
                finished=r["finished"],
                status=r["status"],
                meta=json.loads(r["meta"]),
            )
            for r in reversed(rows)
        ]

    def data_version(self) -> tuple[int, int, int]:
        """A cheap token that changes whenever anyone (this or another process) wrote the store.

        Compare tokens for equality only. Made of PRAGMA data_version (others' commits), this connection's
        total_changes (own commits) and a counter of reopenings (file replaced or recovered).
        """
        with self._lock:
            version = self._run(lambda c: c.execute("PRAGMA data_version").fetchone()[0], write=False)
            assert self._conn is not None
            return (self._generation, version, self._conn.total_changes)

    def close(self) -> None:
        with self._lock:
            self._close_connection()

    def __enter__(self) -> TuningStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
