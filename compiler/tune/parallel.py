"""Searching several tuning problems (shape sets, kernels) at once, one process per CPU.

The search is static analysis in the tuning process; two shape sets are two independent searches. So the
tuning process, once torch and the compiler are imported and warm, forks: each child searches every
CPU-th problem (in order) and sends back what it found (`driver.Searched`, with its winner already compiled
for the correctness gate's reduced shapes), its trials already in the results store through its own
connection; the parent searches the others and keeps the gate and the results. A best config that stands
during a child's search is compiled for the gate there and sent at once; a thread of the parent hands it
to the gate worker (`on_early`), so its check runs while the searches go on. A child ends with the
parent (compiler.support.lifeline), never uses the parent's executor or connections, and leaves with `os._exit`.
Each search is the same deterministic search wherever it runs, so the answers are the same as one after
another.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..results import AnalysisCache
from ..support import lifeline
from ..support.diagnostics import CompileError
from .driver import Searched, TuneOptions, TuneProgress, TuneRun
from .evaluators import Problem
from .executors import InlineExecutor
from .store import TuningStore
from .verdicts import Verdicts

log = logging.getLogger(__name__)


@dataclass
class Elsewhere:
    """Problems searched by a forked child. A thread reads what the child sends (`listen`): a best config's
    gate case, compiled during its search, goes to `on_early` at once; `take(i)` waits for problem i's outcome."""

    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    indices: list[int]
    on_early: Callable[[int, dict[str, Any], Any], None] | None = None
    got: dict[int, Searched | BaseException | tuple] = field(default_factory=dict)
    ended: bool = False
    ready: threading.Condition = field(default_factory=threading.Condition)

    def listen(self) -> None:
        threading.Thread(target=self._read, name="helion-search-reader", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                break
            if message[0] == "early":
                if self.on_early is not None:
                    try:
                        self.on_early(*message[1:])
                    except Exception:  # noqa: BLE001 - the winner is checked after the search all the same
                        log.debug("early gate check not started:\n%s", traceback.format_exc())
                continue
            with self.ready:
                self.got[message[1]] = message[2]
                self.ready.notify_all()
        with self.ready:
            self.ended = True
            self.ready.notify_all()

    def take(self, index: int) -> Searched:
        with self.ready:
            while index not in self.got and not self.ended:
                self.ready.wait()
            outcome = self.got.pop(index, None)
        if outcome is None:
            self.process.join(5)
            raise RuntimeError(f"the search process ended early (exit code {self.process.exitcode})")
        if isinstance(outcome, tuple):  # a CompileError's diagnostics (its pickle would lose them)
            raise CompileError(outcome[1])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def search_elsewhere(problems: list[Problem], options: TuneOptions, store: TuningStore | None,
                     progress: Callable[[TuneProgress], None] | None, should_stop: Any, workers: int,
                     on_early: Callable[[int, dict[str, Any], Any], None] | None = None,
                     cache_path: str | None = None) -> dict[int, Elsewhere]:
    """Fork `workers - 1` children for the problems this process will not search itself: problem i goes to
    child i % workers (child 0 is this process). Returns, per problem index searched elsewhere, its child.
    `on_early(i, config, case)`: problem i's search has a best config that stands, compiled for the gate.
    `cache_path`: the analysis cache whose remembered searches a child takes and adds to (its own connection)."""
    ctx = multiprocessing.get_context("fork")
    out: dict[int, Elsewhere] = {}
    parent = os.getpid()
    path = str(store.path) if store is not None else None
    for w in range(1, workers):
        indices = list(range(w, len(problems), workers))
        if not indices:
            break
        mine, theirs = ctx.Pipe(duplex=False)

        def child(indices: list[int] = indices, theirs: Any = theirs) -> None:
            lifeline.die_with_parent(parent)
            os.dup2(2, 1)  # stdout is the parent's JSON result: whatever a child prints goes to stderr
            sys.stdout = sys.stderr
            own_store = TuningStore(path) if path is not None else None
            own_verdicts = Verdicts(AnalysisCache(cache_path)) if cache_path is not None else None
            for i in indices:
                try:
                    def early(config: dict[str, Any], case: Any, i: int = i) -> None:
                        theirs.send(("early", i, config, case))

                    run = TuneRun(problems[i], options, executor=InlineExecutor(), store=own_store, progress=progress,
                                  should_stop=should_stop, early_sink=early if on_early is not None else None,
                                  verdicts=own_verdicts)
                    try:
                        run.prepare_gate()  # here rather than in the parent, which has searches of its own
                    except Exception:  # noqa: BLE001 - the parent prepares it again and reports what it raises
                        log.debug("gate case of %s not prepared:\n%s", problems[i].kernel, traceback.format_exc())
                    outcome: Searched | BaseException | tuple = run.searched()
                except CompileError as exc:
                    outcome = ("CompileError", exc.diagnostics)
                except BaseException as exc:  # sent to the parent, which raises it where it would have
                    log.debug("search of %s failed:\n%s", problems[i].kernel, traceback.format_exc())
                    outcome = exc if _picklable(exc) else RuntimeError(f"{type(exc).__name__}: {exc}")
                theirs.send(("searched", i, outcome))

        process = ctx.Process(target=child, name=f"helion-search-{w}", daemon=True)
        for stream in (sys.stdout, sys.stderr):  # else a child flushes a copy of what is buffered when it ends
            stream.flush()
        process.start()
        theirs.close()
        elsewhere = Elsewhere(process, mine, indices, on_early)
        for i in indices:
            out[i] = elsewhere
    for elsewhere in {id(e): e for e in out.values()}.values():  # threads only once every child is forked
        elsewhere.listen()
    return out


def _picklable(exc: BaseException) -> bool:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return False
    return True
