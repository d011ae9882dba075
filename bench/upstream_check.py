"""`helion-pallas check` over a folder of someone else's kernel files (upstream Helion's examples/, from a fetched
copy: never kept here), as data: one JSON row per kernel x loop strategy, and a comparison of two such runs.

On a TPU machine the kernels run on the chip; elsewhere in interpret mode after the deviceless libtpu compile
for --chip. The files are checked in this one process (jax starts once: on a TPU VM that is most of a file's
time when each gets its own), each file's rows written as it finishes, so a run cut short keeps them and the
same --out carries on. Compare a chip's run with a CPU's: the rows both ran, how many got the same verdict, every
difference, and any row the CPU calls ok that failed on the chip (issue 28: there must be none).

    python bench/upstream_check.py DIR --out RUN.json [--chip v5e] [--loop-types unroll] [--deadline S]
                                   [--file-limit S]   (exit 3: a file ran out of time; run again to carry on)
    python bench/upstream_check.py --compare CHIP.json CPU.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")


def file_report(path: Path, chip: str, loop_types: list[str]) -> dict[str, Any]:
    """The check of one file as JSON: its rows, its notes (failures beside the rows) and where it ran. A file
    that does not load has no rows (check_rows turns every problem into a row or a note, never raises)."""
    from compiler.check import check_rows

    report = check_rows(str(path), None, chip, loop_types)
    rows = [{"kernel": r.kernel, "loop_type": r.loop_type, "config": r.config, "verdict": r.verdict,
             "max_error": r.max_error, "detail": r.eager[:300]} for r in report.rows]
    return {"rows": rows, "notes": list(report.notes), "where": report.where}


UNFINISHED = 3  # the exit status of a run stopped by --file-limit: run it again with the same --out


def run(folder: Path, out: Path, chip: str, loop_types: list[str], deadline: float, file_limit: float = 0) -> int:
    data = json.loads(out.read_text()) if out.exists() else {"files": {}}
    data.update({"tool": "bench/upstream_check.py", "folder": str(folder), "chip": chip, "loop_types": loop_types,
                 "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ")})
    start = time.monotonic()
    for path in sorted(folder.glob("*.py")):
        if path.name == "__init__.py" or path.name in data["files"]:
            continue
        if deadline and time.monotonic() - start > deadline:
            print(f"deadline reached before {path.name}", flush=True)
            break
        t0 = time.monotonic()
        guard = _give_up_after(file_limit, out, data, path.name) if file_limit else None
        report = data["files"][path.name] = file_report(path, chip, loop_types)
        if guard is not None:
            guard.cancel()
        report["seconds"] = round(time.monotonic() - t0, 1)
        out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"{path.name}: {', '.join(r['verdict'] for r in report['rows']) or 'no kernels'} "
              f"({time.monotonic() - t0:.1f} s)", flush=True)
    return 0


def _give_up_after(seconds: float, out: Path, data: dict[str, Any], name: str) -> threading.Timer:
    """A file still running after `seconds` is recorded without rows and the process ends (status UNFINISHED):
    a compile that does not finish (on a TPU it runs in this process, where nothing can interrupt it) must not
    take the rest of the folder with it."""
    def give_up() -> None:
        data["files"][name] = {"rows": [], "notes": [f"no verdict: still running after {seconds:.0f} s"],
                               "where": "", "seconds": seconds}
        out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"{name}: no verdict after {seconds:.0f} s; run again with the same --out to carry on", flush=True)
        os._exit(UNFINISHED)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    return timer


def verdicts(run_json: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    return {(name, r["kernel"], r["loop_type"]): r["verdict"]
            for name, f in run_json["files"].items() for r in f["rows"]}


def compare(chip_run: dict[str, Any], cpu_run: dict[str, Any]) -> int:
    """Print the agreement; 1 when a row the CPU calls ok failed on the chip."""
    chip, cpu = verdicts(chip_run), verdicts(cpu_run)
    both = sorted(set(chip) & set(cpu))
    same = [k for k in both if chip[k] == cpu[k]]
    ok_chip = sum(chip[k] == "ok" for k in both)
    print(f"{len(both)} rows ran on both ({len(chip)} on the chip, {len(cpu)} on the CPU): {len(same)} with the same "
          f"verdict; {ok_chip} ok on the chip")
    wrong = [k for k in both if cpu[k] == "ok" and chip[k] != "ok"]
    for k in both:
        if chip[k] != cpu[k]:
            print(f"  {k[0]} {k[1]} {k[2]}: chip {chip[k]}, CPU {cpu[k]}")
    print(f"rows the CPU calls ok that failed on the chip: {len(wrong)}")
    return 1 if wrong else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", help="a folder of kernel files")
    parser.add_argument("--out", help="JSON file (extended when it exists)")
    parser.add_argument("--chip", default="v5e", help="the chip to compile for (default v5e)")
    parser.add_argument("--loop-types", default="unroll", help="comma-separated loop strategies (default unroll)")
    parser.add_argument("--deadline", type=float, default=0, help="start no file after this many seconds")
    parser.add_argument("--file-limit", type=float, default=0,
                        help=f"record a file still running after this many seconds without rows and exit {UNFINISHED}")
    parser.add_argument("--compare", nargs=2, metavar=("CHIP_JSON", "CPU_JSON"))
    ns = parser.parse_args(argv)
    if ns.compare:
        return compare(*(json.loads(Path(p).read_text()) for p in ns.compare))
    if not ns.folder or not ns.out:
        parser.error("give a folder and --out, or --compare")
    return run(Path(ns.folder), Path(ns.out), ns.chip, ns.loop_types.split(","), ns.deadline, ns.file_limit)


if __name__ == "__main__":
    sys.exit(main())
