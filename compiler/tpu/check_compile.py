"""The TPU compiler's verdict for `helion-pallas check`: asked beside the interpret-mode run, bounded in time.

Each strategy's generated code goes to libtpu's deviceless compile in a thread (the compile itself runs in a
worker process) while the caller runs the same code in interpret mode. A compile still running after `LIMIT`
seconds is stopped: the row keeps its interpret-mode verdict and says the compiler's is unknown, one line says
how long the compile ran, and the kernel's other strategies are not sent (their code is the same kernel's and
would run as long). An unanswered compile is remembered by the generated code and chip in the store the caller
gives (the analysis cache's snapshots), so no later check waits on it again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..compiled import CompiledKernel

LIMIT = 45.0  # seconds a check waits on one compile (libtpu compiles a kernel in 0.05-20 s when it ends at all)


class Memory(Protocol):
    """Where unanswered compiles are remembered (compiler.results.AnalysisCache has these)."""

    def get_snapshot(self, parts: list[str]) -> Any: ...

    def put_snapshots(self, items: Iterable[tuple[list[str], Any]]) -> None: ...


@dataclass
class Verdict:
    """What the TPU compiler said of one strategy's code: (code, text) when it rejects it; why it gave no verdict
    (a timeout, a crash, libtpu missing) otherwise, if it gave none; lines for the check's notes."""

    rejected: tuple[str, str] | None = None
    unanswered: str | None = None
    notes: list[str] = field(default_factory=list)


class CompilerVerdicts:
    """One check's questions to libtpu. `ask` returns at once; the answer's `result()` waits for it."""

    def __init__(self, memory: Memory | None, limit: float | None = None):
        self.memory = memory
        self.limit = LIMIT if limit is None else limit
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="check-libtpu")
        self._compiler: Any = None
        self._stalled: dict[str, str] = {}  # kernel -> why its remaining strategies are not sent

    def ask(self, ck: CompiledKernel) -> Future[Verdict]:
        name = ck.kernel.name
        if name in self._stalled:
            done: Future[Verdict] = Future()
            done.set_result(Verdict(unanswered=self._stalled[name]))
            return done
        parts = ["libtpu-unanswered", hashlib.sha256(ck.source.encode()).hexdigest(), ck.chip.name, str(self.limit)]
        found = self.memory.get_snapshot(parts) if self.memory is not None else None
        if isinstance(found, dict):
            why = (f"the TPU compiler's verdict is unknown: an earlier check's compile of this code ran "
                   f"{found.get('seconds', 0):.0f} s without finishing")
            self._stalled[name] = why
            done = Future()
            done.set_result(Verdict(unanswered=why, notes=[f"{name}: {why} (remembered; not asked again)"]))
            return done
        return self._pool.submit(self._compile, ck, parts)

    def _compile(self, ck: CompiledKernel, parts: list[str]) -> Verdict:
        from .libtpu_compile import TpuCompiler, libtpu_available

        if self._compiler is None and libtpu_available():
            self._compiler = TpuCompiler(timeout=self.limit)
        diagnostics = ck.check_tpu_compile(self._compiler)
        raw = ck.truth["libtpu"].raw
        errors = [d for d in diagnostics if d.is_error]
        if errors:
            d = errors[0]
            return Verdict(rejected=(d.code, f"{d.code} line {d.range.start.line + 1}: {d.message}"))
        verdict = Verdict()
        for d in diagnostics:  # HPL402 (no libtpu) or an HPL401 warning (timed out, crashed)
            if d.code != "HPL401":
                verdict.notes.append(f"{ck.kernel.name}: the TPU compiler gave no verdict: {d.message}")
                continue
            verdict.unanswered = d.message
            if (d.data or {}).get("kind") == "timeout":
                seconds = getattr(raw, "wall_seconds", 0.0) or getattr(raw, "seconds", 0.0) or self.limit
                why = (f"the TPU compiler's verdict is unknown: its deviceless compile ran {seconds:.0f} s without "
                       "finishing and was stopped")
                verdict.unanswered = why
                self._stalled[ck.kernel.name] = f"{why} (for another strategy of this kernel; not asked again)"
                verdict.notes.append(f"{ck.kernel.name}: {why}; its other strategies are not sent")
                if self.memory is not None:
                    self.memory.put_snapshots([(parts, {"seconds": round(seconds, 1)})])
            else:
                verdict.notes.append(f"{ck.kernel.name}: the TPU compiler gave no verdict: {d.message}")
        return verdict

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._compiler is not None:
            self._compiler.close()
