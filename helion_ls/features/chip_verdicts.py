"""What *Check on TPU* shows (chip_check.py runs it): the lens per kernel and the verdicts as diagnostics.
Shared by codelens.py and chip_check.py; imports no feature."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from ..workers.machine_tpu import MachineTpu, machine_tpu
from ..workers.tuning import TuneJob
from .host import Host

CHECK_SET = -1  # a check job's shape-set slot in the Tuner's jobs: it checks the kernel, not one shape set
SOURCE = "helion check"

def check_evaluator(chip: str, machine: MachineTpu | None = None) -> str:
    """A check job's evaluator: "tpu" where it runs on this machine's chip (so it waits in the chip's line,
    chip_owner.needs_chip), else "interpret"."""
    return "tpu" if (machine or machine_tpu()).chip == chip else "interpret"


def check_label(chip: str) -> str:
    """"Check on TPU v5 lite" where the chip is this machine's, else where it will run."""
    machine = machine_tpu()
    if machine.chip == chip:
        return f"Check on {machine.device_kind}"
    return f"Check for {chip} (interpret mode: {'no TPU here' if machine.chip is None else 'not this TPU'})"


def check_title(job: TuneJob) -> str:
    if job.state == "queued":
        return job.title if job.place else "Check queued…"
    return "Checking on the TPU…" if job.spec.evaluator == "tpu" else "Checking…"


def check_lens(ls: Host, uri: str, kernel: str, chip: str, rng: types.Range) -> types.CodeLens:
    job = ls.tuner.jobs.get((uri, kernel, CHECK_SET))
    if job is not None and job.active:
        title, command, arg = f"{check_title(job)} (cancel)", "helion.cancelTuning", {"uri": uri, "kernel": kernel}
    else:
        title, command, arg = check_label(chip), "helion.checkOnChip", {"uri": uri, "kernel": kernel}
    tooltip = ("Runs the kernel on small inputs with every loop strategy and compares it with the eager reference "
               "and the file's reference(); the verdicts go on the kernel's line.")
    return types.CodeLens(range=rng, command=types.Command(title=title, command=command, arguments=[arg],
                                                           tooltip=tooltip))


def verdict_diagnostics(result: dict[str, Any] | None, message: str | None, rng: dict[str, Any]) -> list[dict]:
    """LSP diagnostics (JSON) of a check's result on the kernel's decorator range `rng`."""
    if result is None:
        return [{"range": rng, "severity": 2, "source": SOURCE, "message": f"Check did not finish: {message}"}]
    where = result.get("where", "")
    rows = result.get("rows") or []
    out = []
    failed = False
    for row in rows:
        if row.get("verdict") != "ok":
            failed = True
            out.append({"range": rng, "severity": 1, "source": SOURCE, "code": "check",
                        "message": f"{row.get('loop_type')} ({row.get('config')}): {row.get('verdict')} — vs eager "
                                   f"{row.get('eager')}, vs reference() {row.get('mine')} (ran {where})"})
    for note in result.get("notes") or []:
        out.append({"range": rng, "severity": 2, "source": SOURCE, "message": note})
    if not failed:  # a note (inputs reduced, say) does not hide that every strategy passed
        strategies = ", ".join(str(r.get("loop_type")) for r in rows) or "no strategy"
        out.insert(0, {"range": rng, "severity": 3, "source": SOURCE,
                    "message": f"Check passed ({strategies}): ran {where}"})
    return out
