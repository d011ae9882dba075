"""The TPU compiler's second opinion on a tuning: started in the background once the model's answer is shown.

When a tuning job ends with a result and `helion.compilerCheck` allows it ("auto": libtpu is installed and
simulates the chip, i.e. v5e, v5p, v6e; "on": every chip; "off"), a crosscheck job runs `helion-pallas
crosscheck` for the same unit on the server's checker (one at a time: a simulation can take GBs). It has the
TPU compiler estimate the model's best configs and stores those estimates; the Best lens then says whether
the compiler agrees (compiler/tune/crosscheck.py), the plot marks the compiler's figures apart from the
model's, and the kernel hover shows the compiler's figure beside the model's. A disagreement is also told
to the user once (compiler_check.py: the checker's jobs told to the client).

Here: whether a check is queued (`after_tuning`, called by commands.py when a tuning is done) and what the
Best lens says of it (`lens_note`, codelens.py).
"""

from __future__ import annotations

import asyncio
import dataclasses

from ..session.settings import Settings
from ..session.store import Summary
from ..workers.tuning import TuneJob
from .host import Host
from .lens_results import evaluated_by

CHECKING = "checking with the TPU compiler…"


def enabled(settings: Settings, chip: str) -> bool:
    if settings.compiler_check == "off":
        return False
    from compiler.ir.chips import SIMULATED_CHIPS  # not tune.schedule: it imports torch, the server must not
    from compiler.tpu.libtpu_compile import libtpu_available

    if not libtpu_available():
        return False
    return settings.compiler_check == "on" or chip in SIMULATED_CHIPS


def after_tuning(ls: Host, job: TuneJob) -> asyncio.Future[TuneJob | None]:
    """A tuning job finished with a result: queue the compiler's check of its unit, where enabled. Decided in
    a thread: the first look for libtpu imports the compiler's checks (~0.15 s), and the Best lens the
    client asks for at this moment must not wait behind that on the event loop."""
    spec = job.spec
    settings = ls.settings.for_uri(spec.uri)

    async def queue() -> TuneJob | None:
        if spec.kind != "tune" or evaluated_by(job) == "tpu":  # a chip's measurement needs no estimate's check
            return None
        if not await asyncio.get_running_loop().run_in_executor(None, enabled, settings, spec.chip):
            return None
        return ls.checker.submit(dataclasses.replace(spec, kind="crosscheck"))

    task = asyncio.ensure_future(queue())
    _queueing.add(task)  # held until done (the loop keeps only a weak reference)
    task.add_done_callback(_queueing.discard)
    return task


_queueing: set[asyncio.Future] = set()


def lens_note(ls: Host, uri: str, kernel: str, shape_set: int, summary: Summary | None) -> tuple[str, str]:
    """(suffix of the Best lens title, sentence for its tooltip) about the compiler's check of this unit."""
    if summary is not None and summary.best.evaluator == "tpu":  # measured: the compiler's estimate is moot
        return "", ""
    job = ls.checker.jobs.get((uri, kernel, shape_set))
    if job is not None and job.active:
        return f" · {CHECKING}", "The TPU compiler is estimating the model's best configs."
    check = summary.check if summary is not None else None
    if check is None:
        return "", ""
    verdict = check.verdict
    short = {
        "agrees": " · TPU compiler agrees",
        "disagrees": " · ⚠ TPU compiler disagrees",
        "pending": "",
        "not comparable": "",
    }[verdict]
    return short, check.message() + "."
