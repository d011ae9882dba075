"""Workspace commands (each takes one object argument) and the tuning feedback to the client.

helion.tune {uri, kernel, shapeSet|null} · helion.tuneFile {uri} · helion.cancelTuning {uri|null, kernel|null}
helion.applyConfig {uri, kernel, shapeSet|null, config, configs?}: for a kernel with a vLLM `configs/<kernel>/`
folder, its entries in the chip's platform file (vllm_target.py); else the decorator edit (config_edits.py; see
apply_plan.py for when it writes one config per shape set) goes through workspace/applyEdit against the
document version it was computed from; then the user is told the file has unsaved changes (as helion/applied {uri, message} to
a client that announced clientShowsApplyNotice: it drops the notice on save) and the new text compiles at
once. Tuning runs kernel code, so the tune commands first ask `ls.code_execution_refusal` (see trust.py) and
answer {jobs: [], refused} with a message to the user when it says no. Tuning state changes become
helion/tuningState notifications, refreshed lenses and a message at the end, plus a cancellable
$/progress per job unless the client announced (initializationOptions.clientShowsTuningProgress) that it
shows tuning progress itself from the notifications.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from compiler.ir.config import Config
from compiler.tune.evidence import evidence

from ..rewrite.edits import EditError, apply_edit
from ..session.documents import KernelView, Loaded
from ..session.trust import WHY_TUNING_RUNS_CODE
from ..workers.chip_owner import holder_text
from ..workers.tuning import FINAL, TuneJob, TuneSpec
from . import crosscheck, vllm_target
from .config_edits import best_configs, planned_edit, workspace_edit
from .host import Host
from .kernels import current_config, find_kernel, trial_key
from .lens_results import evaluated_by, fmt_seconds, same_problem, unstored_summary
from .offer import Offer, apply_offer, tuned_message
from .scheduling import schedule

log = logging.getLogger(__name__)


def _arg(args: tuple[Any, ...], *required: str) -> dict[str, Any]:
    if len(args) != 1 or not isinstance(args[0], dict):
        raise JsonRpcInvalidParams("expected one object argument")
    arg = args[0]
    missing = [k for k in required if not arg.get(k)]
    if missing:
        raise JsonRpcInvalidParams(f"missing {', '.join(missing)}")
    return arg


# -- tuning -------------------------------------------------------------------------------------------
def tuning_refused(ls: Host, uri: str, what: str) -> dict[str, Any] | None:
    """The command's answer when tuning may not run code for `uri` (the user is told why), else None."""
    refused = ls.code_execution_refusal(uri)
    if refused is None:
        return None
    ls.tell_user(f"Not tuning {what}: {refused}. {WHY_TUNING_RUNS_CODE}", types.MessageType.Warning)
    return {"jobs": [], "refused": refused}


def start_tuning(ls: Host, loaded: Loaded, view: KernelView, shape_set: int | None) -> list[TuneJob]:
    settings = ls.settings.for_uri(loaded.uri)
    units = [u for u in view.units if u.args and (shape_set is None or u.index == shape_set)]
    if not units:
        which = "shape set" if shape_set is None else f"shape set {shape_set}"
        ls.tell_user(
            f"{view.name} has no {which} to tune: add a '# helion: args(...)' line above its decorator.",
            types.MessageType.Warning,
        )
        return []
    path = to_fs_path(loaded.uri) or "kernel.py"
    jobs = []
    for unit in units:
        spec = TuneSpec(
            uri=loaded.uri,
            kernel=view.name,
            shape_set=unit.index,
            source_hash=view.source_hash,
            text=loaded.text,
            file_name=os.path.basename(path) if path.endswith(".py") else "kernel.py",
            chip=settings.chip,
            evaluator=settings.evaluator,
            executor=settings.executor,
            store_path=ls.store_for(settings).path,
            budget_seconds=settings.tune_budget_seconds,
            max_evals=settings.tune_max_evals,
            shape_key=unit.key.shape_key,
        )
        jobs.append(ls.tuner.submit(spec))
    return jobs


def _job_json(job: TuneJob) -> dict[str, Any]:
    return {
        "uri": job.spec.uri,
        "kernel": job.spec.kernel,
        "shapeSet": job.spec.shape_set,
        "state": job.state,
        "phase": job.phase,
        "evaluated": job.evaluated,
        "total": job.total,
        "best": job.best,
        "message": job.message,
        "title": job.title,  # what the lens shows
        "place": job.place,  # in the line for this machine's TPU (2 = next), else 0
        "fallback": job.fallback,  # why the tuner used the model on a machine with the chip
    }


class JobProgress:
    """One cancellable work-done progress per tuning job, fed in order by a queue."""

    def __init__(self, ls: Host, job: TuneJob):
        self.ls = ls
        self.job = job
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        ls, job = self.ls, self.job
        token = f"helion-tune-{uuid.uuid4().hex}"
        try:
            await ls.work_done_progress.create_async(token)
        except Exception as exc:
            log.info("client refused work-done progress: %s", exc)
            return
        cancel = ls.work_done_progress.tokens.get(token)
        if cancel is not None:
            cancel.add_done_callback(
                lambda f: f.cancelled() and ls.tuner.cancel_job(job, "cancelled from the client")
            )
        title = f"Tuning {job.spec.kernel} (shape set {job.spec.shape_set}) on {job.spec.chip}"
        ls.work_done_progress.begin(
            token, types.WorkDoneProgressBegin(title=title, cancellable=True, percentage=0)
        )
        while True:
            snap = await self.queue.get()
            if snap["state"] in FINAL:
                message = snap["message"] or snap["state"]
                ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
                return
            message = snap["title"]
            if snap["best"] and snap["best"].get("seconds"):
                message += f", best {fmt_seconds(snap['best']['seconds'])}"
            pct = int(100 * snap["evaluated"] / snap["total"]) if snap["total"] else None
            ls.work_done_progress.report(token, types.WorkDoneProgressReport(message=message, percentage=pct))


def connect_tuner(ls: Host) -> None:
    """Tuning state to the client. A new state or phase is told at once; new counts wait for the next lens
    refresh (`ls.lenses.before_send`) and are told with it, so the notification and the lenses fetched
    after the refresh show the same count (the job's title says the counts last told)."""
    progress: dict[int, JobProgress] = {}
    told: dict[int, tuple[str, str | None]] = {}  # job -> (state, phase) last told the client
    counts: dict[int, TuneJob] = {}  # jobs with counts not told yet
    fell_back: set[int] = set()  # jobs whose fallback to the model was told

    def tell(job: TuneJob) -> None:
        job.show()
        counts.pop(id(job), None)
        told[id(job)] = (job.state, job.phase)
        if job.state in FINAL:
            told.pop(id(job))
        snap = _job_json(job)
        ls.protocol.notify("helion/tuningState", snap)
        if id(job) in progress:
            progress[id(job)].queue.put_nowait(snap)
            if job.state in FINAL:
                progress.pop(id(job))

    def tell_counts() -> None:
        for job in list(counts.values()):
            if job.active:
                tell(job)
        counts.clear()

    ls.lenses.before_send = tell_counts

    def changed(job: TuneJob) -> None:
        ls.lenses.changed()
        if job.active and told.get(id(job)) == (job.state, job.phase):
            counts[id(job)] = job  # only the counts moved: told with the next lens refresh
            return
        caps = ls.client_capabilities.window
        wants_progress = (
            caps is not None and bool(caps.work_done_progress) and not ls.client_shows_tuning_progress
        )
        if id(job) not in progress and job.state == "running" and wants_progress:
            progress[id(job)] = JobProgress(ls, job)
        tell(job)
        name = f"{job.spec.kernel} (shape set {job.spec.shape_set})"
        if job.fallback is not None and id(job) not in fell_back:  # told once, as soon as the tuner says it
            fell_back.add(id(job))
            ls.log_to_client(f"Tuning {name} uses the model, not this machine's TPU: {job.fallback}"
                             f"{holder_text()}", types.MessageType.Warning)
        if job.state == "done":
            crosscheck.after_tuning(ls, job)
            asyncio.create_task(tell_tuned(ls, job, name))
        elif job.state == "failed":
            ls.tell_user(f"Tuning {name} failed: {job.message}", types.MessageType.Warning)
        elif job.state == "stale":
            ls.log_to_client(f"Tuning {name} stopped: {job.message}", types.MessageType.Warning)

    ls.tuner.on_change = changed


async def tell_tuned(ls: Host, job: TuneJob, name: str) -> None:
    """The message after a tuning: its best, and what the lenses show about applying it (offer.py, the
    lens's own decision, on the summary the lens reads)."""
    head = f"Tuned {name} [{evidence(evaluated_by(job), job.spec.chip)}]"
    if job.fallback and evaluated_by(job) != "tpu":
        head += f" — not on this machine's TPU: {job.fallback}"
    try:
        shown = await lens_offer(ls, job)
    except Exception:  # the message must come whatever the store or the document do
        log.exception("reading the tuned result of %s failed", name)
        shown = None
    best = job.best or {}
    if shown is not None:
        summary, offer, destination = shown
        text = tuned_message(head, _best_text(summary.best.config, summary.best.seconds), offer, destination)
    elif best.get("config") is not None:
        text = tuned_message(head, _best_text(best["config"], best.get("seconds")), None)
    else:
        text = head + "."
    not_stored = (job.result or {}).get("store_error")
    if not_stored:
        text += (
            f" These results were NOT stored ({not_stored}): the lens shows them until the server "
            "restarts; set helion.storePath to a writable file to keep them."
        )
    ls.tell_user(text, types.MessageType.Warning if not_stored else types.MessageType.Info)


def _best_text(config: dict, seconds: float | None) -> str:
    return Config(config).short() + (f" — {fmt_seconds(seconds)}" if seconds else "")


async def lens_offer(ls: Host, job: TuneJob) -> tuple[Any, Offer, str] | None:
    """(summary, offer, what Apply does with the best) as the Best lens of the job's shape set shows them now;
    None when the document no longer has that kernel as it was tuned."""
    state = ls.analyzer.state(job.spec.uri)
    if state is None:
        return None
    loaded = await ls.analyzer.load(state.uri, ls.settings.for_uri(state.uri).chip)
    view = loaded.kernels.get(job.spec.kernel) if loaded is not None else None
    if view is None or job.spec.shape_set >= len(view.units) or view.source_hash != job.spec.source_hash:
        return None
    unit = view.units[job.spec.shape_set]
    if not same_problem(job, view, unit, job.spec.chip) or unit.key.chip != job.spec.chip:
        return None
    current, _ = current_config(ls, view, unit)
    store = ls.store_for(ls.settings.for_uri(loaded.uri))
    request = (trial_key(unit), current)
    summary = (await ls.pool.call(store.summaries, [request])).get(request)
    if summary is None and job.best and job.best.get("config"):
        summary = unstored_summary(job)  # as the lens shows a result the store did not keep
    if summary is None:
        return None
    found = vllm_target.target(loaded, view, unit)
    where = f"write it to {found.key_label} of {found.shown_file}" if found is not None else "put it in the decorator"
    return summary, apply_offer(summary, current), where


# -- apply --------------------------------------------------------------------------------------------
async def apply_config(ls: Host, arg: dict[str, Any]) -> dict[str, Any]:
    uri, kernel, shape_set = arg["uri"], arg["kernel"], arg.get("shapeSet")
    loaded, view = await find_kernel(ls, uri, kernel)
    written = await vllm_target.apply(ls, loaded, view, arg)  # a kernel whose configs vLLM reads from files
    if written is not None:
        return written
    if arg.get("configs") is None and shape_set is None and len(view.units) > 1:
        found = await best_configs(ls, loaded, view)
        fallback = arg.get("config")
        arg = {**arg, "configs": [c if c is not None else fallback for c in found]}
        if any(c is None for c in arg["configs"]):
            ls.tell_user(
                f"No tuned config for every shape set of {kernel} yet: tune it first.",
                types.MessageType.Warning,
            )
            return {"applied": False}
    try:
        edit, what = await planned_edit(ls, loaded, view, arg)
        change = workspace_edit(ls, loaded, edit)
    except EditError as exc:
        ls.tell_user(f"Cannot apply the config to {kernel}: {exc}", types.MessageType.Error)
        return {"applied": False}
    label = f"Apply tuned config to {kernel}"
    params = types.ApplyWorkspaceEditParams(edit=change, label=label)
    result = await ls.workspace_apply_edit_async(params)
    if not result.applied:
        ls.log_to_client(f"{label}: the client did not apply the edit ({result.failure_reason})")
        return {"applied": False}
    after_apply(ls, loaded.uri, apply_edit(loaded.text, edit), what)
    return {"applied": True}


def after_apply(ls: Host, uri: str, text: str, what: str) -> None:
    """The edit is in the editor's buffer, not on disk: say so, and compile the new text now (its
    diagnostics, hovers and lenses must not wait for a save)."""
    name = os.path.basename(to_fs_path(uri) or uri)
    notice = f"Applied {what}. {name} has unsaved changes: save it to keep them."
    if ls.client_shows_apply_notice:  # it shows the notice until the file is saved
        log.info("%s", notice)
        ls.protocol.notify("helion/applied", {"uri": uri, "message": notice})
    else:
        ls.tell_user(notice)
    state = ls.analyzer.docs.get(uri)
    if state is None:
        return
    state.force_compile = True  # the edit's didChange compiles, if it has not arrived yet
    if state.text == text:
        schedule(ls, uri, compile=True)
    ls.lenses.changed()


def register(ls: Host) -> None:
    connect_tuner(ls)

    @ls.command("helion.tune")
    async def tune(ls: Host, *args: Any) -> dict[str, Any]:
        arg = _arg(args, "uri", "kernel")
        loaded, view = await find_kernel(ls, arg["uri"], arg["kernel"])
        refused = tuning_refused(ls, loaded.uri, view.name)
        if refused is not None:
            return refused
        jobs = start_tuning(ls, loaded, view, arg.get("shapeSet"))
        return {"jobs": [_job_json(j) for j in jobs]}

    @ls.command("helion.tuneFile")
    async def tune_file(ls: Host, *args: Any) -> dict[str, Any]:
        state = ls.analyzer.state(_arg(args, "uri")["uri"])
        if state is None:
            raise JsonRpcInvalidParams(f"{args[0]['uri']} is not open")
        uri = state.uri
        refused = tuning_refused(ls, uri, "the kernels of this file")
        if refused is not None:
            return refused
        loaded = await ls.analyzer.load(uri, ls.settings.for_uri(uri).chip)
        jobs = [
            j
            for view in (loaded.kernels.values() if loaded else [])
            for j in start_tuning(ls, loaded, view, None)
        ]
        return {"jobs": [_job_json(j) for j in jobs]}

    @ls.command("helion.cancelTuning")
    def cancel(ls: Host, *args: Any) -> dict[str, Any]:
        arg = _arg(args)
        state = ls.analyzer.state(arg["uri"]) if isinstance(arg.get("uri"), str) else None
        jobs = ls.tuner.cancel(state.uri if state is not None else arg.get("uri"), arg.get("kernel"))
        return {"cancelled": [_job_json(j) for j in jobs]}

    @ls.command("helion.applyConfig")
    async def apply(ls: Host, *args: Any) -> dict[str, Any]:
        return await apply_config(ls, _arg(args, "uri", "kernel"))
