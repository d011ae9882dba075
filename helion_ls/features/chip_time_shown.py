"""What the kernel hover says of a shape set's time on this machine's TPU (chip_time.py measures it): the time
of the current config measured on the chip with its spread and runs, the measurement waiting or running, a link
to measure it, or why the figures beside it are estimates. Shared by hover.py and chip_time.py; imports no
feature."""

from __future__ import annotations

import json
import urllib.parse

from compiler.ir.config import Config

from ..session.chip_times import ChipTime
from ..session.documents import Unit
from ..workers.machine_tpu import machine_tpu
from ..workers.tuning import TuneJob, measure_slot
from .client_commands import MEASURE_ON_CHIP
from .host import Host
from .kernels import chip_time_key


def not_here(chip: str) -> str | None:
    """Why a kernel compiled for `chip` cannot be measured on this machine (None: it can)."""
    machine = machine_tpu()
    if machine.chip == chip:
        return None
    if machine.chip is None:
        plain = machine.why_none in ("", "no TPU here")
        return "there is no TPU here" if plain else f"there is no TPU it can use here ({machine.why_none})"
    return f"this machine's TPU is a {machine.device_kind}, not a {chip}"


def measure_title(job: TuneJob) -> str:
    """A measure job's state in a few words."""
    if job.state == "queued":
        return job.title if job.place else "Measurement queued…"
    return "Measuring on the TPU…" if job.active else f"Measurement {job.state}"


def measured_text(found: ChipTime, device_kind: str) -> str:
    """" · measured on TPU v5 lite **117.9 µs** per call (best of 610 runs, slowest loop 8.3 % over)"."""
    text = f"measured on {found.device_kind or device_kind} **{_us(found.seconds or 0.0)}** per call"
    if found.repeats and found.spread is not None:
        text += f" (best of {found.repeats} runs, slowest loop {100 * found.spread:.1f} % over)"
    return text


def chip_time_text(ls: Host, uri: str, kernel: str, unit: Unit, config: Config | None, chip: str,
                   tuned: str | None) -> str:
    """The hover's words on the current config's time on the chip, to follow the model's estimate. `tuned`:
    what a tuning measured of this config (the tuning store's), shown when there is no newer measurement."""
    why = not_here(chip)
    if why is not None:
        return f"(an estimate: {why}; nothing is measured)"
    machine = machine_tpu()
    found = ls.chip_times.get(chip_time_key(unit, config)) if config is not None else None
    job = ls.tuner.jobs.get((uri, kernel, measure_slot(unit.index)))
    if job is not None and job.active and config is not None and job.spec.config == json.dumps(dict(config)):
        return f"· {measure_title(job)}"
    link = _link({"uri": uri, "kernel": kernel, "shapeSet": unit.index, "again": True})
    if found is not None and found.measured:
        return f"· {measured_text(found, machine.device_kind or '')} · [measure again]({link})"
    if tuned:
        return f"· {tuned} · [measure again]({link})"
    if found is not None:
        return f"· not measured on {machine.device_kind} ({found.verdict}: {found.why[:200]}) · [try again]({link})"
    return f"· [Measure on {machine.device_kind}]({link})"


def _link(argument: dict) -> str:
    return f"command:{MEASURE_ON_CHIP}?{urllib.parse.quote(json.dumps([argument]))}"


def _us(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} µs"
