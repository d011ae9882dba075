"""The tuning results store: one SQLite file shared by the CLI, the language server and its workers.

Every trial is kept (not only the best), so the editor can plot a tuning run and a later run can start
from what is known. Rows are keyed by `TrialKey` (source hash, shape key, chip, evaluator, compiler
version); a key with another compiler version is simply never matched.

Several processes write at once, and damage never reaches the caller: the file is a `SqliteFile`
(compiler/support/sqlite_file.py: WAL, short write transactions, busy retries, a damaged or foreign file moved
aside and replaced).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from ..support.sqlite_file import SqliteFile
from .keys import TrialKey
from .objective import OBJECTIVE_SQL

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


class StoreError(RuntimeError):
    """The store cannot be used (permissions, disk full, locked for longer than busy_timeout)."""


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


class TuningStore(SqliteFile):
    """A handle on the store file; thread-safe. Pickles as its path (reopened in the receiving process)."""

    SCHEMA = _SCHEMA
    APPLICATION_ID = APPLICATION_ID
    SCHEMA_VERSION = SCHEMA_VERSION
    WHAT = "tuning store"
    ERROR = StoreError

    def __init__(self, path: str | os.PathLike[str] | None = None, *, busy_timeout: float = 30.0):
        super().__init__(Path(path) if path is not None else default_store_path(), busy_timeout)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_reopen, (str(self.path), self.busy_timeout))

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
        """Best "ok" trial for the key's kernel, shapes and chip: the fastest by tuning's objective (a config
        over the default scoped VMEM counts as VMEM_MARGIN slower, see objective.py).

        The evaluator is `evaluator`, else `key.evaluator`; when both are None the most trustworthy evaluator
        that has a result wins (tpu, then compile, then model, then any other), not the smallest number.
        """
        top = self.top(key, 1, evaluator)
        return top[0] if top else None

    def top(self, key: TrialKey, n: int, evaluator: str | None = None) -> list[Trial]:
        """The n best distinct configs ("ok" trials; each config's best trial), ranked as best() ranks."""
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
                f"SELECT * FROM trials WHERE {ok} AND evaluator = ? ORDER BY {OBJECTIVE_SQL}, timestamp, id",
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

    def __enter__(self) -> TuningStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
