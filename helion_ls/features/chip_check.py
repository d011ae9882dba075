"""*Check on TPU*: `helion.checkOnChip {uri, kernel}` runs `helion-pallas check --json` for one kernel (its small
inputs, every loop strategy, against the eager reference and the file's own reference()) on this machine's
TPU when it is the chip compiled for, else in interpret mode after the TPU compiler's verdict (the CLI decides
and says where it ran). It is a job of the server's Tuner (kind "check"), so it waits in the chip's line
behind a tuning that holds the chip (chip_owner.py) instead of finding the chip held.

Its verdicts become diagnostics on the kernel's decorator line (an error per failing strategy, one
information line when all pass), published with the document's other diagnostics (server.publish adds them)
until the kernel's code changes. The lens per kernel ("Check on TPU v5 lite", "Checking on the TPU…",
"Waiting for the TPU, 2nd in line…") is `check_lens`.
"""

from __future__ import annotations

import os
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from ..session.trust import WHY_TUNING_RUNS_CODE
from ..workers.tuning import FINAL, TuneJob, TuneSpec
from .chip_verdicts import CHECK_SET, check_evaluator, check_title, verdict_diagnostics
from .host import Host
from .kernels import find_kernel


def start_check(ls: Host, loaded: Any, view: Any) -> TuneJob:
    settings = ls.settings.for_uri(loaded.uri)
    path = to_fs_path(loaded.uri) or "kernel.py"
    spec = TuneSpec(
        uri=loaded.uri, kernel=view.name, shape_set=CHECK_SET, source_hash=view.source_hash, text=loaded.text,
        file_name=os.path.basename(path) if path.endswith(".py") else "kernel.py", chip=settings.chip,
        evaluator=check_evaluator(settings.chip), executor="inline",
        store_path=None, budget_seconds=None, max_evals=None, kind="check",
    )
    return ls.tuner.submit(spec)


def finished(ls: Host, job: TuneJob) -> None:
    """A check job ended: its verdicts on the kernel's line (unless the kernel changed since), and a message."""
    if job.state not in ("done", "failed"):
        return
    state = ls.analyzer.state(job.spec.uri)
    loaded = state.loaded if state is not None else None
    view = loaded.kernels.get(job.spec.kernel) if loaded is not None else None
    if view is None or view.source_hash != job.spec.source_hash:
        return
    where, rng = loaded.layout.range_json(view.decorator_range, ls.encoding())
    diagnostics = verdict_diagnostics(job.result, job.message, rng)
    ls.chip_verdicts.setdefault(job.spec.uri, {})[job.spec.kernel] = (job.spec.source_hash, where, diagnostics)
    ls.republish(job.spec.uri)
    result = job.result or {}
    verdict = result.get("verdict", job.state)
    ls.tell_user(f"Check of {job.spec.kernel}: {verdict} (ran {result.get('where', 'nowhere: ' + str(job.message))})",
                 types.MessageType.Info if verdict == "ok" else types.MessageType.Warning)


def register(ls: Host) -> None:
    """After commands.register: check jobs' state changes come here, the rest go on to the tuning feedback."""
    tuning_changed = ls.tuner.on_change

    def changed(job: TuneJob) -> None:
        if job.spec.kind != "check":
            tuning_changed(job)
            return
        ls.lenses.changed()
        if job.state in FINAL:
            finished(ls, job)

    ls.tuner.on_change = changed

    @ls.command("helion.checkOnChip")
    async def check_on_chip(ls: Host, *args: Any) -> dict[str, Any]:
        if len(args) != 1 or not isinstance(args[0], dict) or not args[0].get("uri") or not args[0].get("kernel"):
            raise JsonRpcInvalidParams("expected one object argument {uri, kernel}")
        loaded, view = await find_kernel(ls, args[0]["uri"], args[0]["kernel"])
        refused = ls.code_execution_refusal(loaded.uri)
        if refused is not None:
            ls.tell_user(f"Not checking {view.name}: {refused}. {WHY_TUNING_RUNS_CODE}", types.MessageType.Warning)
            return {"refused": refused}
        job = start_check(ls, loaded, view)
        return {"state": job.state, "place": job.place, "title": check_title(job)}
