"""One SQLite file shared by several processes, that recovers from damage: the tuning store and the
analysis cache are both one of these.

The file is in WAL mode, every write is one short `BEGIN IMMEDIATE` transaction, and SQLITE_BUSY is
retried with backoff. Both are caches, so damage never reaches the caller: a file that is not a database,
a database of another program or schema version, or one that turns out corrupt mid-use is renamed to
`<name>.corrupt-<UTC time>` (with its -wal/-shm) and a fresh file takes its place; a file deleted or
replaced while open is noticed before the next statement. Opening and recovery are serialised between
processes by an advisory lock on `<name>.lock`, so two processes never rename each other's fresh file.
A subclass gives its schema, its application id and schema version, the words it is called by in
messages, and the exception it raises when it cannot be used.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, TypeVar

log = logging.getLogger(__name__)

# Primary SQLite result codes (https://sqlite.org/rescode.html).
_BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_SHORT_READ = 522  # SQLITE_IOERR_SHORT_READ: the file ends before its pages do (truncated)
_READONLY_DBMOVED = 1032  # the file was unlinked or renamed under an open connection

T = TypeVar("T")


class _Foreign(Exception):
    """A valid SQLite file that is not one of ours (of this schema version)."""


def error_code(exc: sqlite3.Error) -> int:
    return getattr(exc, "sqlite_errorcode", -1)


def _damaged(exc: sqlite3.Error) -> bool:
    code = error_code(exc)
    return code & 0xFF in _CORRUPT_CODES or code == _SHORT_READ


def file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


class SqliteFile:
    """A handle on the file; thread-safe. Subclasses set the class attributes below."""

    SCHEMA: ClassVar[str]
    APPLICATION_ID: ClassVar[int]
    SCHEMA_VERSION: ClassVar[int]
    WHAT: ClassVar[str]  # how messages name the file, e.g. "tuning store"
    ERROR: ClassVar[type[Exception]]  # raised when the file cannot be used

    def __init__(self, path: Path, busy_timeout: float):
        self.path = path
        self.busy_timeout = busy_timeout
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._file: tuple[int, int] | None = None
        self._generation = 0  # bumped on every (re)open
        with self._lock:
            self._open(bad_file=None)

    @contextlib.contextmanager
    def _process_lock(self) -> Iterator[None]:
        """Held while opening or recovering; waits busy_timeout at most (a process stopped while holding it
        must not stop every other one for good: they report the file unusable instead)."""
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + self.busy_timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise OSError(f"{self.path}.lock is held by another process for more than "
                                      f"{self.busy_timeout:g} s") from None
                    time.sleep(0.01 * (1 + random.random()))
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
        """Connect, moving aside the file if it is `bad_file` or turns out not to be one of ours."""
        self._close_connection()
        if self.path.is_dir():
            raise self.ERROR(f"cannot open {self.WHAT} {self.path}: it is a directory")
        blocker = next((p for p in self.path.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise self.ERROR(f"cannot open {self.WHAT} {self.path}: {blocker} is a file, not a directory")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._process_lock():
                if bad_file is not None and file_id(self.path) == bad_file:
                    self._move_aside("it is corrupt")
                if not self.path.exists():
                    self._remove_orphans()
                conn = self._connect()
                try:
                    self._check_or_init(conn)
                except (_Foreign, sqlite3.DatabaseError) as exc:
                    conn.close()
                    if isinstance(exc, sqlite3.DatabaseError) and not _damaged(exc):
                        raise
                    self._move_aside(str(exc) or type(exc).__name__)
                    conn = self._connect()
                    self._check_or_init(conn)
                file = file_id(self.path)  # under the lock: the file this connection has open
        except (OSError, sqlite3.Error, _Foreign) as exc:
            raise self.ERROR(f"cannot open {self.WHAT} {self.path}: {exc}") from exc
        self._conn = conn
        self._file = file
        self._generation += 1

    def _check_or_init(self, conn: sqlite3.Connection) -> None:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if (app_id, version) != (self.APPLICATION_ID, self.SCHEMA_VERSION):
            tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if app_id != 0 or version != 0 or tables != 0:
                raise _Foreign(
                    f"not a helion-ls {self.WHAT} of schema {self.SCHEMA_VERSION} "
                    f"(application_id={app_id:#x}, user_version={version}, {tables} schema objects)"
                )
            # An empty database (SQLite itself creates files with zero length): make it ours.
            conn.executescript(
                f"BEGIN IMMEDIATE; {self.SCHEMA} PRAGMA application_id = {self.APPLICATION_ID}; "
                f"PRAGMA user_version = {self.SCHEMA_VERSION}; COMMIT;"
            )
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            log.warning("%s %s: WAL mode unavailable (journal_mode=%s)", self.WHAT, self.path, mode)
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
        log.warning("%s %s is unusable (%s); moved it to %s and started a fresh one", self.WHAT, self.path,
                    reason, target)

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
            log.warning("%s %s: removed %s left by the deleted database", self.WHAT, self.path, suffix)

    def _close_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or file_id(self.path) != self._file:
            if self._conn is not None:
                log.warning("%s %s was deleted or replaced while open; reopening", self.WHAT, self.path)
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
                    code = error_code(exc)
                    if code & 0xFF in _BUSY_CODES and time.monotonic() < deadline:
                        time.sleep(delay * (1 + random.random()))
                        delay = min(delay * 2, 0.25)
                        continue
                    if recovered:
                        raise self.ERROR(f"{self.WHAT} {self.path}: {exc}") from exc
                    if _damaged(exc):
                        recovered = True
                        log.warning("%s %s: %s", self.WHAT, self.path, exc)
                        self._open(bad_file=self._file)
                        continue
                    if code == _READONLY_DBMOVED or file_id(self.path) != self._file:
                        recovered = True
                        continue  # _connection() reopens
                    raise self.ERROR(f"{self.WHAT} {self.path}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._close_connection()
