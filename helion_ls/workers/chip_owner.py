"""One owner of this machine's TPU: which jobs need the chip, where they stand in its line, and why a tuning
that could have measured on it used the model instead.

libtpu lets one process at a time open the chip; a second tuner started while the first holds it would find
it held and fall back to the model (rightly, when another program holds it; needlessly, when it is the
server's own other job). So the server's Tuner runs the jobs that need the chip one after the other
(tuning.py asks `needs_chip`), and the ones waiting say where they stand in line.
"""

from __future__ import annotations

from .machine_tpu import MachineTpu, holders, machine_tpu

CHIP_KINDS = ("tune", "check", "measure")  # job kinds that run kernels (crosscheck only compiles, deviceless)
FALLBACK_PREFIX = "helion-pallas tune: model estimates, not the chip: "  # compiler/tune/command.py prints it
BUSY_WORDS = ("lockfile", "holds this machine's TPU", "already in use")


def needs_chip(kind: str, evaluator: str, chip: str, machine: MachineTpu | None = None) -> bool:
    """Does a job of `kind` with `evaluator` for `chip` run on this machine's TPU? `tpu` always asks for it;
    `auto` does when the machine's TPU is that chip (the tuner then measures there)."""
    if kind not in CHIP_KINDS:
        return False
    if evaluator == "tpu":
        return True
    machine = machine or machine_tpu()
    return evaluator == "auto" and machine.chip == chip


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def waiting_title(place: int) -> str:
    """The lens of a job in the chip's line: place 2 is the first one waiting (the running job is 1st)."""
    return f"Waiting for the TPU, {ordinal(place)} in line…"


def fallback_reason(stderr_line: str) -> str | None:
    """The tuner's reason for using the model on a machine with a TPU, from its stderr line; else None."""
    if not stderr_line.startswith(FALLBACK_PREFIX):
        return None
    return stderr_line[len(FALLBACK_PREFIX):].strip() or "the chip could not be used"


def short_reason(why: str) -> str:
    """A few words for a lens title; the whole reason goes to its tooltip and the output."""
    if any(word in why for word in BUSY_WORDS):
        return "the TPU was held by another program"
    return "the TPU could not be used"


def holder_text(machine: MachineTpu | None = None) -> str:
    """Who holds the chip, where this user may see it: " (held by pid 4242: python train.py)", else ""."""
    machine = machine or machine_tpu()
    found = holders("/", machine.device_files) if machine.device_files else {}
    if not found:
        return ""
    pid, cmdline = next(iter(sorted(found.items())))
    return f" (held by pid {pid}: {cmdline[:80]})"
