"""Code lenses per shape set, above its `# helion: args(...)` line (or the decorator when there is none: a
kernel without shape lines, whose shape sets come from the file's calls, has them all on its decorator).

  shapes in use (opens the generated module) · "Tune on <chip>" when the store has no result (its tooltip
  says that tuning runs the kernel's code; "Tuning off: <why>" where that is not allowed, see trust.py)
  "Tuning… n/N" while a tuner searches, "Verifying best…" while it checks the winner (click to cancel)
  "Best: <short config> — <time> (× vs current) [what the time is]" (throughput and the rest in its tooltip) · "Apply" (only for a gain of at least
  objective.least_gain, compiler/tune/objective.py; decided in offer.py, which the message after a tuning reads too);
  "(current)" once applied
  "Retune on <chip> (shapes|chip changed)" when the last tuning of the shape set was for other shapes or
  another chip: a result is shown only for the shape set's text and chip it was tuned for
  "Check on TPU v5 lite" per kernel on its decorator, where the chip is this machine's (chip_verdicts.py)
  "Not tunable: …" (no command) for a shape set that does not compile or does not fit the chip's HBM
Results come from the tuning store (cached, read in a thread), so runs made elsewhere show up; the
watcher reports another process writing the store (disk_changes.py). The tuner's state is read when a
request is answered (never cached), and refreshes are paced by `ls.lenses` (see pacing.py).
"""

from __future__ import annotations

import ast
import asyncio
import logging
import re
from typing import Any

from lsprotocol import types

from compiler import parse_python
from compiler.ir.config import Config
from compiler.ir.specs import TensorSpec
from compiler.tune import objective
from compiler.tune.evidence import evidence

from ..session.documents import KernelView, Unit
from ..session.store import Summary
from ..session.trust import WHY_TUNING_RUNS_CODE
from ..workers.chip_owner import short_reason
from ..workers.machine_tpu import machine_tpu
from ..workers.tuning import TuneJob
from . import apply_plan, crosscheck, vllm_target
from .chip_verdicts import check_lens
from .client_commands import SHOW_GENERATED
from .host import Host
from .kernels import current_config, trial_key
from .lens_results import fmt_seconds, same_problem, unstored_summary
from .offer import apply_offer

log = logging.getLogger(__name__)
ARGS_INSIDE = re.compile(r"\bargs\((.*)\)\s*$")
TUNE_TOOLTIP = f"Searches configs with the performance model. {WHY_TUNING_RUNS_CODE}"
NOT_TUNABLE = "Not tunable: no config can compile or run these shapes (see Problems)"


def throughput(seconds: float, metrics: dict[str, Any], compiled: Any) -> str:
    """TF/s for compute-bound kernels, GB/s for memory-bound ones (by the plan's arithmetic intensity)."""
    tflops, gbps = metrics.get("tflops"), metrics.get("gbps")
    compute_bound = bool(tflops and tflops >= 1)  # without a plan: a guess from the figures themselves
    if compiled is not None and seconds > 0:
        plan = compiled.plan
        tflops = tflops if tflops is not None else plan.flops / seconds / 1e12
        gbps = gbps if gbps is not None else plan.hbm_bytes / seconds / 1e9
        compute_bound = plan.hbm_bytes > 0 and plan.flops / plan.hbm_bytes >= compiled.chip.ridge
    if compute_bound and tflops:
        return f"{tflops:.0f} TF/s" if tflops >= 10 else f"{tflops:.2f} TF/s"
    if gbps:
        return f"{gbps:.0f} GB/s"
    return ""


def compile_failed(ls: Host, view: KernelView, unit: Unit) -> bool:
    """The unit was compiled and no config can mend it (it does not compile, or its arrays do not fit the chip's
    HBM: HPL303): tuning it could only fail, so no Tune lens is offered."""
    hit = ls.analyzer.cache.get("front", unit.key, view)
    return hit is not None and hit[0].untunable


def best_title(summary: Summary, current: Config | None, compiled: Any, chip: str, fallback: str | None = None) -> str:
    """The best config, its time and what that time is: measured on the named TPU (with how many runs), or an
    estimate for the chip (tune/evidence.py) and, where the machine's TPU went unused, why in a few words.
    Short, to fit a window: the rest is in `best_tooltip`."""
    best = summary.best
    title = f"Best: {Config(best.config).short()} — {fmt_seconds(best.seconds)}"
    title += apply_offer(summary, current).short_note()
    return title + f" [{evidence_label(best.evaluator, chip, best.metrics, fallback)}]"


def evidence_label(evaluator: str, chip: str, metrics: dict[str, Any], fallback: str | None = None) -> str:
    """"measured on TPU v5 lite, 1200 runs", "model estimate for v5e: the TPU was held by another program"."""
    label = evidence(evaluator, chip)
    runs = metrics.get("repeats")
    if evaluator == "tpu" and isinstance(runs, int) and runs > 0:
        return f"{label}, {runs} runs"
    if evaluator != "tpu" and fallback:
        return f"{label}: {short_reason(fallback)}"
    return label


def best_tooltip(summary: Summary, current: Config | None, compiled: Any, fallback: str | None = None) -> str:
    """What the Best lens's title leaves out: throughput, the gain over the current config, the spread of a
    chip measurement, why the machine's TPU was not used."""
    best = summary.best
    parts = []
    rate = throughput(best.seconds, best.metrics, compiled)
    if rate:
        parts.append(f"{rate}.")
    note = apply_offer(summary, current).note().strip(" ()")
    if note:
        parts.append(f"{note[0].upper()}{note[1:]}.")
    spread = best.metrics.get("spread")
    if best.evaluator == "tpu" and isinstance(spread, int | float):
        parts.append(f"Spread of the timed loops: {100 * spread:.1f} %.")
    if best.evaluator != "tpu" and fallback:
        parts.append(f"Not measured on this machine's TPU: {fallback}.")
    return " ".join(parts)


def tuned_note(summary: Summary | None, current: Config | None) -> str | None:
    """Why the current config, a tuned pick that needs more than the default scoped VMEM, is worth it (for
    its HPL301 hint); None when it is not such a pick."""
    if summary is None or current is None or Config(summary.best.config) != current:
        return None
    best, within = summary.best, summary.within
    if not objective.over_default(best.metrics) or not best.seconds:
        return None
    what = "an estimate" if best.evaluator != "tpu" else "measured"
    if within is None or not within.seconds:
        return f"Tuning picked it: no config it tried fits the default limit ({best.evaluator}, {what})"
    gain = within.seconds / best.seconds - 1
    why = f", over the {objective.VMEM_MARGIN:.0%} an estimate must gain" if objective.margined(best.metrics) else ""
    return (
        f"Tuning picked it: {gain:.0%} faster than the best config within the default limit "
        f"({Config(within.config).short()}, {fmt_seconds(within.seconds)}; {best.evaluator}, {what}){why}"
    )


def what_changed(job: TuneJob | None, view: KernelView, unit: Unit, chip: str) -> str | None:
    """"shapes" or "chip" when a finished tuning of this shape set was for other shapes or another chip."""
    if job is None or job.active or job.spec.source_hash != view.source_hash:
        return None
    if job.spec.shape_key != unit.key.shape_key:
        return "shapes"
    return "chip" if job.spec.chip != chip else None


def _lens(
    rng: types.Range, title: str, command: str = "", argument: dict | None = None, tooltip: str | None = None
) -> types.CodeLens:
    return types.CodeLens(
        range=rng,
        command=types.Command(
            title=title, command=command, arguments=[argument] if argument else None, tooltip=tooltip
        ),
    )


def _written(lines: list[str], view: KernelView, unit: Unit) -> dict[str, str]:
    """Each argument's text as written on the unit's shape line (`eps=1e-5` stays `1e-5`)."""
    if unit.index >= len(view.shape_set_ranges):
        return {}
    line_no = view.shape_set_ranges[unit.index].start.line
    found = ARGS_INSIDE.search(lines[line_no]) if line_no < len(lines) else None
    if found is None:
        return {}
    source = f"f({found.group(1)})"
    try:
        call = parse_python(source, mode="eval").body
    except SyntaxError:
        return {}
    if not isinstance(call, ast.Call):
        return {}
    return {kw.arg: ast.get_source_segment(source, kw.value) or "" for kw in call.keywords if kw.arg}


def _shapes_title(lines: list[str], view: KernelView, unit: Unit) -> str:
    if not unit.args:
        return "no shape set: add a # helion: args(...) line"  # a lens title is plain text
    written = _written(lines, view, unit)
    groups: dict[str, list[str]] = {}
    for name, spec in unit.args.items():
        text = str(spec) if isinstance(spec, TensorSpec) or not written.get(name) else written[name]
        groups.setdefault(text, []).append(name)
    title = "  ".join(f"{', '.join(names)}: {spec}" for spec, names in groups.items())
    origin = view.origin(unit.index)  # a shape set found in the file's calls says which call
    return f"{title} ({origin.label.replace('`', '')})" if origin is not None else title


def unit_lenses(
    ls: Host,
    uri: str,
    view: KernelView,
    unit: Unit,
    rng: types.Range,
    summary: Summary | None,
    chip: str,
    lines: list[str],
    apply_title: str = "Apply",
) -> list[types.CodeLens]:
    target = {"uri": uri, "kernel": view.name, "shapeSet": unit.index}
    lenses = [_lens(rng, _shapes_title(lines, view, unit), SHOW_GENERATED, target)]
    if not unit.args:
        return lenses
    refused = ls.code_execution_refusal(uri)
    job = ls.tuner.jobs.get((uri, view.name, unit.index))
    cancel = {"uri": uri, "kernel": view.name}
    if job is not None and job.active:
        lenses.append(_lens(rng, f"{job.title} (cancel)", "helion.cancelTuning", cancel))
        return lenses
    stored = summary is not None
    if summary is None and job is not None and job.state == "done" and job.best and job.best.get("config"):
        if same_problem(job, view, unit, chip):  # a result the store did not keep: still shown
            summary = unstored_summary(job)
    if summary is None:
        if refused is not None:
            lenses.append(_lens(rng, f"Tuning off: {refused.split(';')[0]}", "helion.tune", target, refused))
            return lenses
        failed = job is not None and job.state in ("failed", "stale") and same_problem(job, view, unit, chip)
        if compile_failed(ls, view, unit):
            lenses.append(_lens(rng, NOT_TUNABLE))
            return lenses
        changed = what_changed(job, view, unit, chip)
        title = f"Tuning {job.state}: retry on {chip}" if failed else f"Tune on {chip}"
        if changed is not None:  # the figures of the last tuning belong to other shapes or another chip
            title = f"Retune on {chip} ({changed} changed)"
        lenses.append(_lens(rng, title, "helion.tune", target, TUNE_TOOLTIP))
        return lenses
    current, compiled = current_config(ls, view, unit)
    again = refused or f"Tune again. {TUNE_TOOLTIP}"
    note, why = crosscheck.lens_note(ls, uri, view.name, unit.index, summary)
    fallback = job.fallback if job is not None and same_problem(job, view, unit, chip) else None
    title = best_title(summary, current, compiled, chip, fallback) + ("" if stored else " (not stored)") + note
    detail = best_tooltip(summary, current, compiled, fallback)
    lenses.append(_lens(rng, title, "helion.tune", target, " ".join(p for p in (detail, why, again) if p)))
    if apply_offer(summary, current).apply:
        apply = {**target, "config": summary.best.config}
        lenses.append(_lens(rng, apply_title, "helion.applyConfig", apply))
    return lenses


async def lenses_for(ls: Host, uri: str, shown_in: str | None = None) -> list[types.CodeLens]:
    """The lenses of document `uri`'s kernels that are shown in `shown_in` (one cell of a notebook; default:
    the document itself). Their commands name `uri`."""
    settings = ls.settings.for_uri(uri)
    loaded = await ls.analyzer.load(uri, settings.chip)
    if loaded is None or not loaded.kernels:
        return []
    store = ls.store_for(settings)
    requests = []
    for view in loaded.kernels.values():
        for unit in view.units:
            if unit.args and not _tuning(ls, uri, view, unit):
                requests.append((trial_key(unit), current_config(ls, view, unit)[0]))
    summaries = await ls.pool.call(store.summaries, requests) if requests else {}
    problem = store.new_problem()
    if problem is not None:
        ls.tell_user(
            f"The tuning store {store.path} cannot be used ({problem}). Tuning still runs and its lenses show "
            "the results, but they are not kept: set helion.storePath to a writable file.",
            types.MessageType.Warning,
        )
    enc = ls.encoding()
    out: list[types.CodeLens] = []
    notes: dict[Any, str | None] = {}
    for view in loaded.kernels.values():
        found = [
            summaries.get((trial_key(unit), current_config(ls, view, unit)[0])) if unit.args else None
            for unit in view.units
        ]
        for unit, summary in zip(view.units, found, strict=True):
            if not _tuning(ls, uri, view, unit):  # a unit being tuned keeps its note until its result
                notes[unit.key] = tuned_note(summary, current_config(ls, view, unit)[0])
        where, rng = loaded.layout.range(view.decorator_range, enc)
        if where == (shown_in or uri) and machine_tpu().chip == settings.chip:  # a TPU VM: Check on TPU
            out.append(check_lens(ls, uri, view.name, settings.chip, rng))
        for unit, summary in zip(view.units, found, strict=True):
            anchor = view.shape_set_ranges[unit.index] if unit.index < len(view.shape_set_ranges) else None
            where, rng = loaded.layout.range(anchor or view.decorator_range, enc)
            if where != (shown_in or uri):
                continue
            title = await _apply_title(ls, loaded, view, unit, summary, found)
            out.extend(unit_lenses(ls, uri, view, unit, rng, summary, settings.chip, loaded.lines, title))
    ls.analyzer.set_tuned(uri, notes)
    return out


def _tuning(ls: Host, uri: str, view: KernelView, unit: Unit) -> bool:
    """Is the unit being tuned? Its lens then shows the job's title, so its fetch reads nothing from the store:
    the tuner writes its trials there while it searches, so every fetch would find the store changed and read a
    search's thousands of trials again before answering, and lenses fetched that slowly lag the status bar's
    count, which comes by notification (issue 42: "Tuning… 0/14112" beside 124/14112)."""
    job = ls.tuner.jobs.get((uri, view.name, unit.index))
    return job is not None and job.active


async def _apply_title(
    ls: Host, loaded: Any, view: KernelView, unit: Unit, summary: Summary | None, bests: list
) -> str:
    """"Apply", or what it will write when one config for every shape set would be wrong. A lens request
    never waits on a compile (lenses fetched slowly lag behind what they show): until the compiles the plan
    needs are known (`_plan_soon`), the title is "Apply"."""
    vllm = vllm_target.lens_title(loaded, view, unit)
    if vllm is not None:  # Apply writes the shape set's entry in vLLM's platform file
        return vllm
    current = current_config(ls, view, unit)[0]
    if summary is None or len(view.units) < 2 or not apply_offer(summary, current).apply:
        return "Apply"
    try:
        plan = await apply_plan.plan_for(ls, loaded, view, unit.index, summary.best.config, bests, known_only=True)
    except apply_plan.Unknown:
        _plan_soon(ls, loaded, view, unit, summary, bests)
        return "Apply"
    except ValueError:
        return "Apply"
    return plan.title


_PLANNING: set[tuple] = set()  # (unit key, config) whose plan is being worked out


def _plan_soon(ls: Host, loaded: Any, view: KernelView, unit: Unit, summary: Summary, bests: list) -> None:
    """Work out the Apply plan in the background (its compiles land in apply_plan.CLEAN), then refresh."""
    key = (unit.key, repr(Config(summary.best.config)))
    if key in _PLANNING:
        return
    _PLANNING.add(key)

    async def plan() -> None:
        try:
            await apply_plan.plan_for(ls, loaded, view, unit.index, summary.best.config, bests)
        except ValueError:  # nothing fits some shape set: the lens stays "Apply", the command says why
            pass
        except Exception:  # a failed compile costs the title, never the lenses
            log.exception("working out the Apply plan of %s failed", view.name)
        finally:
            _PLANNING.discard(key)
        ls.lenses.changed()

    asyncio.create_task(plan())


def register(ls: Host) -> None:
    @ls.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def code_lens(ls: Host, params: types.CodeLensParams) -> list[types.CodeLens]:
        uri = params.text_document.uri
        state = ls.analyzer.state(uri)
        if state is None or not state.open:
            return []
        token = ls.lenses.fetch_started()
        answered = False
        try:
            found = await lenses_for(ls, state.uri, uri)
            answered = True
        finally:  # cancelled by the client, or failed: it showed nothing new
            ls.lenses.fetch_done(token, answered)
        return found
