"""The per-call time of a kernel's current config on this machine's TPU: `helion.measureOnChip {uri, kernel,
shapeSet}` (the hover's "Measure on TPU v5 lite" link, the client's command) runs `helion-pallas measure` of the
config the shape set compiles with now, as a job of the server's Tuner (kind "measure"), so it waits in the
chip's line behind a tuning or a check that holds the chip. Its result is remembered by kernel source, shapes,
chip and config (session/chip_times.py) and the kernel hover shows it beside the model's estimate
(chip_time_shown.py). Where the chip is not this machine's, nothing is measured: the command says why.
"""

from __future__ import annotations

import json
import os
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from compiler.ir.config import Config

from ..session.chip_times import ChipTime
from ..session.trust import WHY_TUNING_RUNS_CODE
from ..workers.tuning import FINAL, TuneJob, TuneSpec, measure_slot
from .chip_time_shown import measure_title, not_here
from .host import Host
from .kernels import chip_time_key, current_config, find_kernel


def start_measure(ls: Host, loaded: Any, view: Any, index: int, config: Any) -> TuneJob:
    settings = ls.settings.for_uri(loaded.uri)
    unit = view.units[index]
    path = to_fs_path(loaded.uri) or "kernel.py"
    spec = TuneSpec(
        uri=loaded.uri, kernel=view.name, shape_set=measure_slot(index), source_hash=view.source_hash,
        text=loaded.text, file_name=os.path.basename(path) if path.endswith(".py") else "kernel.py",
        chip=settings.chip, evaluator="tpu", executor="inline", store_path=None, budget_seconds=None,
        max_evals=None, kind="measure", shape_key=unit.key.shape_key, config=json.dumps(dict(config)),
    )
    return ls.tuner.submit(spec)


def finished(ls: Host, job: TuneJob) -> None:
    """A measure job ended: its time (or why there is none) remembered for its kernel text, shapes, chip and
    config, and a message."""
    if job.state not in ("done", "failed"):
        return
    spec = job.spec
    found = ChipTime.of(job.result, job.message)
    ls.chip_times.put((spec.source_hash, spec.shape_key, spec.chip, Config(json.loads(spec.config))), found)
    name = f"{spec.kernel} (shape set {spec.index})"
    if found.measured:
        ls.tell_user(f"Measured {name} on {found.device_kind}: {found.seconds * 1e6:.1f} µs per call (best of "
                     f"{found.repeats} runs); the kernel's hover shows it", types.MessageType.Info)
    else:
        ls.tell_user(f"{name} was not measured on the TPU ({found.verdict}): {found.why}", types.MessageType.Warning)


def register(ls: Host) -> None:
    """After chip_check.register: measure jobs' state changes come here, the rest go on."""
    passed_on = ls.tuner.on_change

    def changed(job: TuneJob) -> None:
        if job.spec.kind != "measure":
            passed_on(job)
            return
        if job.state in FINAL:
            finished(ls, job)

    ls.tuner.on_change = changed

    @ls.command("helion.measureOnChip")
    async def measure_on_chip(ls: Host, *args: Any) -> dict[str, Any]:
        arg = args[0] if len(args) == 1 and isinstance(args[0], dict) else {}
        if not arg.get("uri") or not arg.get("kernel") or not isinstance(arg.get("shapeSet", 0), int):
            raise JsonRpcInvalidParams("expected one object argument {uri, kernel, shapeSet}")
        loaded, view = await find_kernel(ls, arg["uri"], arg["kernel"])
        index = arg.get("shapeSet") or 0
        if not 0 <= index < len(view.units) or not view.units[index].args:
            raise JsonRpcInvalidParams(f"{view.name} has no shape set {index}")
        chip = ls.settings.for_uri(loaded.uri).chip
        why = not_here(chip)
        if why is not None:
            ls.tell_user(f"Not measuring {view.name} on a TPU: {why}; its times are the model's estimates for "
                         f"{chip}", types.MessageType.Info)
            return {"refused": why}
        refused = ls.code_execution_refusal(loaded.uri)
        if refused is not None:
            ls.tell_user(f"Not measuring {view.name}: {refused}. {WHY_TUNING_RUNS_CODE}", types.MessageType.Warning)
            return {"refused": refused}
        unit = view.units[index]
        config, _ = current_config(ls, view, unit)
        if config is None:
            raise JsonRpcInvalidParams(f"{view.name} shape set {index} has not compiled yet (or does not compile)")
        key = chip_time_key(unit, config)
        known = ls.chip_times.get(key)
        if known is not None and known.measured and not arg.get("again"):
            return {"state": "done", "seconds": known.seconds, "repeats": known.repeats, "spread": known.spread}
        job = start_measure(ls, loaded, view, index, config)
        return {"state": job.state, "place": job.place, "title": measure_title(job)}

