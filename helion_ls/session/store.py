"""The tuner's results store as code lenses need it: cached answers, read off the event loop.

Lenses ask for many (kernel, shape set) keys on every refresh; answers are kept until the store's
`data_version()` changes (any process wrote it, or it was replaced or recovered), which is what makes
results written elsewhere (the CLI, a TPU host sharing the store) appear. A store that cannot be opened
or read answers "no result", says why in the log, and offers the reason once (`new_problem`) so the user
is told.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

from compiler.ir.config import Config
from compiler.tune.crosscheck import TOP, CompilerCheck, compare, latest_by_config
from compiler.tune.keys import TrialKey
from compiler.tune.objective import over_default
from compiler.tune.store import StoreError, Trial, TuningStore, default_store_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Summary:
    """What a lens shows for one unit: the best trial and, when known, the current config's trial; when the
    best needs more than the default scoped VMEM, the best trial within it (`within`), which tuning's
    objective ranks behind it (compiler/tune/objective.py); the TPU compiler's check of the model's picks and
    its estimate of the current config, when the store has them."""

    best: Trial
    current: Trial | None
    evaluated: int
    within: Trial | None = None
    check: CompilerCheck | None = None
    compiler_current: Trial | None = None


class StoreView:
    def __init__(self, path: str | None):
        self.path = os.fspath(path) if path else os.fspath(default_store_path())
        self._store: TuningStore | None = None
        self._version: Any = None
        self._answers: dict[tuple[TrialKey, Config | None], Summary | None] = {}
        self._lock = threading.Lock()
        self._last_error: str | None = None
        self._told: set[str] = set()

    def _open(self) -> TuningStore:
        if self._store is None:
            self._store = TuningStore(self.path)
        return self._store

    def _fresh(self) -> TuningStore:
        store = self._open()
        version = store.data_version()
        if version != self._version:
            self._version = version
            self._answers.clear()
        return store

    def summaries(
        self, requests: list[tuple[TrialKey, Config | None]]
    ) -> dict[tuple[TrialKey, Config | None], Summary | None]:
        """Blocking: call in a thread. `(key, current config)` -> Summary | None."""
        with self._lock:
            try:
                store = self._fresh()
                for req in requests:
                    if req not in self._answers:
                        self._answers[req] = self._summary(store, *req)
                self._last_error = None
                return {req: self._answers[req] for req in requests}
            except Exception as exc:  # a broken store must never break lenses
                reason = str(exc) if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
                if reason != self._last_error:
                    log.warning("tuning store %s unreadable: %s", self.path, reason)
                    self._last_error = reason
                self._drop()
                return dict.fromkeys(requests)

    def cached(self, request: tuple[TrialKey, Config | None]) -> Summary | None:
        """The last answer for `request` if there is one, without touching the store (never blocks: for
        hovers, which answer from what lenses already read)."""
        return self._answers.get(request)

    def new_problem(self) -> str | None:
        """Why the store cannot be read, the first time each reason is seen (for telling the user once)."""
        problem = self._last_error
        if problem is None or problem in self._told:
            return None
        self._told.add(problem)
        return problem

    def trials(self, key: TrialKey) -> list[Trial]:
        with self._lock:
            try:
                return self._fresh().trials(key)
            except Exception as exc:
                log.warning("tuning store %s unreadable: %s", self.path, exc)
                self._drop()
                return []

    def changed(self) -> bool:
        """Blocking. Did anyone write the store since the last answers?"""
        with self._lock:
            try:
                store = self._open()
                return store.data_version() != self._version
            except Exception as exc:
                log.warning("tuning store %s unreadable: %s", self.path, exc)
                self._drop()
                return True

    def _drop(self) -> None:
        if self._store is not None:
            try:
                self._store.close()
            except Exception:  # closing a broken handle: nothing more to do
                log.debug("closing the store failed", exc_info=True)
        self._store = None
        self._version = None
        self._answers.clear()

    @staticmethod
    def _summary(store: TuningStore, key: TrialKey, current: Config | None) -> Summary | None:
        best = store.best(key)
        if best is None:
            return None
        same_evaluator = key.with_evaluator(best.evaluator)
        trials = store.trials(same_evaluator)
        match = within = None
        for trial in trials:
            if trial.verdict != "ok" or not trial.seconds:
                continue
            if current is not None and Config(trial.config) == current:
                if match is None or trial.seconds < match.seconds:
                    match = trial
            if over_default(best.metrics) and not over_default(trial.metrics):
                if within is None or trial.seconds < within.seconds:
                    within = trial
        compiler = latest_by_config(store.trials(key.with_evaluator("schedule")))
        check = compare(store.top(key.with_evaluator("model"), TOP), compiler, key.chip) if compiler else None
        if check is not None and all(c.compiler is None and c.error is None for c in check.checked):
            check = None  # the compiler estimated other configs (a schedule tuning), none of these picks
        mine = compiler.get(current) if current is not None else None
        return Summary(best, match, len(trials), within, check,
                       mine if mine is not None and mine.verdict == "ok" else None)

    def close(self) -> None:
        with self._lock:
            self._drop()
