"""Record what a real TPU says of this project's kernels, as data CI can hold the CPU verdicts to.

On a machine whose jax sees a TPU, for that chip:
  conformance  every case of tests/conformance with CI's choice of runs (one config, every loop strategy):
               compiled or diagnosed (the chip's own compile refusing it is a diagnosis, HPL302/HPL203/HPL401),
               and the largest error against the case's plain-torch reference
  check        `helion-pallas check` rows (every kernel x loop strategy) of examples/ and tests/kernels/:
               the verdict and the largest error against the eager reference (else the file's reference())
A unit listed under "awaiting" (its code changed after the chip answered) is not "done", so the next run records it
and takes it off that list. Rows are appended to the JSON file as they finish, so a run cut short keeps what it measured and a later run
with the same --out carries on where it stopped. tests/test_chip_truth.py compares the CPU's verdicts
(interpret mode plus the deviceless libtpu compile) with every recorded row.

    python -m tests.chip_truth.record --out tests/chip_truth/v5e.json [--only conformance|check] [--deadline S]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

CHECK_FILES = ("examples", "tests/kernels")
LOOP_TYPES = ["unroll", "emit_pipeline", "fori_loop"]


def conformance_rows(path: Path, chip: str) -> list[dict[str, Any]]:
    """One row per run of the case, as CI runs it."""
    from conformance.runner import Target, run_path

    result = run_path(path, fast=True, every_strategy=True, target=Target(chip, tpu_compile=True))
    if result.error:
        return [{"suite": "conformance", "case": path.stem, "outcome": "case-error", "detail": result.error[:300]}]
    return [{"suite": "conformance", "case": path.stem, "strategy": r.strategy, "config": r.config,
             "outcome": r.outcome, "code": r.code, "max_error": r.max_error, "detail": r.detail[:300]}
            for r in result.runs]


def check_rows(path: Path, chip: str) -> list[dict[str, Any]]:
    from compiler.check import check_rows as rows_of

    report = rows_of(str(path), None, chip, LOOP_TYPES)
    return [{"suite": "check", "file": str(path.relative_to(REPO)), "kernel": r.kernel, "loop_type": r.loop_type,
             "config": r.config, "verdict": r.verdict, "max_error": r.max_error, "detail": r.eager[:300]}
            for r in report.rows]


def units(only: str | None) -> list[tuple[str, Path]]:
    from conformance.case import discover

    out: list[tuple[str, Path]] = []
    if only in (None, "conformance"):
        out += [("conformance", p) for p in discover()]
    if only in (None, "check"):
        out += [("check", p) for d in CHECK_FILES for p in sorted((REPO / d).glob("*.py"))]
    return out


def unit_key(suite: str, path: Path) -> str:
    return f"{suite}:{path.relative_to(REPO)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file (extended when it exists)")
    parser.add_argument("--only", choices=["conformance", "check"])
    parser.add_argument("--deadline", type=float, default=0, help="stop starting new units after this many seconds")
    parser.add_argument("--chip", help="the chip (default: the TPU jax sees); --interpret runs on a CPU")
    parser.add_argument("--interpret", action="store_true", help="record the CPU's verdicts instead (for a diff)")
    ns = parser.parse_args(argv)
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    if ns.interpret:
        os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    from compiler.tpu.runtime import claim_tpu, machine_chip, tpu_device

    on_chip = not ns.interpret and claim_tpu()
    chip = ns.chip or (machine_chip() if on_chip else None)
    if chip is None:
        parser.error("no TPU here: pass --chip with --interpret")
    out = Path(ns.out)
    data = json.loads(out.read_text()) if out.exists() else {"rows": [], "done": []}
    data.update({
        "chip": chip,
        "machine": (f"{tpu_device().device_kind}, {os.cpu_count()} CPU cores" if on_chip
                    else f"interpret mode on {platform.machine()} ({os.cpu_count()} cores)"),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "jax": jax.__version__,
        "recorded_by": "python -m tests.chip_truth.record",
    })
    start = time.monotonic()
    for suite, path in units(ns.only):
        key = unit_key(suite, path)
        if key in data["done"]:
            continue
        if ns.deadline and time.monotonic() - start > ns.deadline:
            print(f"deadline reached; {key} and later units not recorded", flush=True)
            break
        t0 = time.monotonic()
        try:
            rows = conformance_rows(path, chip) if suite == "conformance" else check_rows(path, chip)
        except Exception as exc:  # noqa: BLE001 - a unit that breaks the recorder is a row, not the end of it
            rows = [{"suite": suite, "unit": key, "outcome": "recorder-error", "detail": f"{type(exc).__name__}: {exc}"[:300]}]
        for row in rows:
            row["unit"] = key
        data["rows"] = [r for r in data["rows"] if r.get("unit") != key] + rows
        data["done"].append(key)
        data.get("awaiting", {}).pop(str(path.relative_to(REPO)), None)  # the chip has answered for its new code
        out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        verdicts = ", ".join(str(r.get("outcome") or r.get("verdict")) for r in rows)
        print(f"{key}: {verdicts} ({time.monotonic() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
