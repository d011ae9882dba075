"""How long `helion-pallas check` takes on each kernel file of a folder (upstream Helion's examples/ and
pretuned_kernels/ from a fetched copy, never kept here): one `check --chip CHIP` process per file, every loop
strategy, on this machine, as a user runs it. Issue 41's bar: 60 s a file.

Each file is checked at the shapes its own calls give (reduced as `check` reduces them), except the kernels
whose upstream tests use other, small shapes (TEST_SHAPES: the expected sizes of test/test_examples.py's
jagged inputs, whose lengths it draws at random), which are checked at those through a `SMALL = {...}` line
added to a temporary copy. Every run gets an empty analysis cache of its own, so nothing is remembered from
an earlier run.

    python bench/check_times.py DIR [DIR ...] --out RUN.json [--md TABLE.md] [--chip v5e] [--limit 600]
                                [--deadline S] [--only a.py,b.py] [--logs DIR]
    python bench/check_times.py --merge RUN1.json RUN2.json ... [--md TABLE.md]
A run cut short keeps what it measured (written after each file); the same --out carries on.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BAR = 60.0  # seconds a file (issue 41)
# upstream test/test_examples.py: num_rows rows of 1..max_cols entries (expected (max_cols + 1) / 2 each), M = 8
TEST_SHAPES = {
    "jagged_mean.py": {"x_data": "f32[1056, 8]", "x_offsets": "i64[33]", "x_feature_counts": "i32[32]",
                       "max_M": "8"},  # 32 rows, max_cols 64
    "jagged_sum.py": {"x_data": "f32[4160, 8]", "x_offsets": "i64[129]"},  # 128 rows, max_cols 64
    "jagged_layer_norm.py": {"x_values": "f32[4160, 8]", "x_offsets": "i64[129]", "eps": "1e-6"},
}


def check_file(path: Path, chip: str, limit: float, log: Path | None = None) -> dict[str, Any]:
    """One check process of `path`: its wall time, exit status and summary line, and what it said of the TPU
    compiler's verdicts (its whole output to `log`)."""
    with tempfile.TemporaryDirectory() as tmp:
        target = path
        shapes = TEST_SHAPES.get(path.name)
        if shapes is not None and "\nSMALL = " not in path.read_text():
            target = Path(tmp) / path.name
            target.write_text(path.read_text() + f"\n\nSMALL = {shapes!r}\n")
        env = {**os.environ, "HELION_LS_ANALYSIS_CACHE": str(Path(tmp) / "analysis.sqlite"),
               "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]), "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1"}
        start, used, load = time.monotonic(), _children_cpu(), os.getloadavg()[0]
        proc = subprocess.Popen([sys.executable, "-m", "compiler.cli", "check", str(target), "--chip", chip],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
        stopped = 0.0
        try:
            out, _ = proc.communicate(timeout=limit)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            stopped = _stop_tree(proc.pid)  # what it and its children had used, before they go unreaped
            out, _ = proc.communicate()
            code = None
        seconds, cpu = time.monotonic() - start, _children_cpu() - used
        cpu = max(cpu, stopped)
    if log is not None:
        log.write_text(out)
    lines = out.strip().splitlines()
    summary = lines[-1] if lines and (" passed, " in lines[-1]) else ("still running" if code is None else "")
    unknown = [ln for ln in lines if "verdict is unknown" in ln and not ln.startswith(" ")]
    return {"seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "load": round(load, 1), "exit": code,
            "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ"), "commit": _commit(), "summary": summary, "shapes": "test" if shapes else "file",
            "compiler_unknown": unknown[:3]}


def _commit() -> str:
    """The checked-out commit of this repository (what was measured), '+' when its tree has changes."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           cwd=REPO).stdout
    return head.strip() + ("+" if dirty.strip() else "")


def _stop_tree(pid: int) -> float:
    """Kill a check still running at the limit and every process under it (libtpu's worker, the reference
    process), children first; the CPU seconds they had used (Linux /proc: a killed check's own children are never
    reaped into its count)."""
    from idle_waits import tree

    pids = tree(pid)
    tick = os.sysconf("SC_CLK_TCK")
    used = 0.0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used += sum(int(f) for f in fields[11:15]) / tick  # utime, stime, cutime, cstime
    for p in reversed(pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    return used


def _children_cpu() -> float:
    """User + system CPU seconds of every finished child process (and the children they waited for): what a
    check costs whatever else the machine runs, unlike its wall time."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(folders: list[Path], out: Path, chip: str, limit: float, deadline: float, only: set[str],
        logs: Path | None = None) -> dict:
    data = json.loads(out.read_text()) if out.exists() else {"files": {}}
    data.update({"tool": "bench/check_times.py", "chip": chip, "cores": os.cpu_count(),
                 "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ")})
    begun = time.monotonic()
    for folder in folders:
        nested = [p for p in folder.glob("*/*.py") if p.stem == p.parent.name]  # pretuned_kernels/<k>/<k>.py
        for path in sorted(nested or folder.glob("*.py")):  # else examples/*.py (not run.py beside the kernels)
            name = str(path.relative_to(folder.parent))
            if path.name.startswith("_") or name in data["files"] or (only and path.name not in only):
                continue
            if deadline and time.monotonic() - begun > deadline:
                print(f"deadline reached before {name}", flush=True)
                return data
            log = logs / (name.replace("/", "_") + ".txt") if logs is not None else None
            found = data["files"][name] = check_file(path, chip, limit, log)
            out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
            print(f"{name}: {found['seconds']} s, {found['summary']}", flush=True)
    return data


def merged(runs: list[dict]) -> dict:
    """One run's data from several (the later run's row where both measured a file); dated by the latest."""
    files: dict[str, Any] = {}
    for data in runs:
        files.update(data["files"])
    last = max(runs, key=lambda d: d["date"])
    return {**last, "files": files}


def _cpu(f: dict[str, Any]) -> float:
    """A row's CPU seconds (a row of an old run without them: its wall seconds, an upper bound)."""
    return f["cpu_seconds"] if f.get("cpu_seconds") is not None else f["seconds"]


IDLE = 1.0  # a 1-minute load average under this as the file began: the machine was idle, its wall time is the check's


def within(f: dict[str, Any]) -> bool:
    """Did the file's check finish within the bar (seconds on an idle 2-core machine)? By its wall time where it was
    measured on an idle machine; else by CPU seconds, a bound: on an idle 2-core machine a check's wall time is at
    most its CPU seconds plus its idle waits (bench/idle_waits.py: 0.1 s), while a loaded machine's wall time counts
    the other processes' turns too. (A check whose libtpu compile runs beside its interpret-mode run takes less
    wall time than CPU seconds.)"""
    if f["exit"] is None:
        return False
    return _cpu(f) <= BAR or (f.get("load", IDLE) < IDLE and f["seconds"] <= BAR)


def table(data: dict) -> str:
    """The markdown table of a run: files slowest first (CPU seconds), with the bar's count."""
    files = sorted(data["files"].items(), key=lambda kv: -_cpu(kv[1]))
    by_cpu = sum(within(f) for _, f in files)
    by_wall = sum(f["exit"] is not None and f["seconds"] <= BAR for _, f in files)
    lines = [f"{by_cpu} of {len(files)} files within {BAR:.0f} s on an idle machine (CPU seconds, or wall time measured "
             f"idle); {by_wall} within {BAR:.0f} s of wall time as measured ({data['date']}, --chip {data['chip']}, "
             f"{data['cores']} cores)", "",
             "CPU seconds: user + system time of the check process and the processes it waited for (libtpu's worker "
             "among them); load: the 1-minute load average as the file began (this machine is shared).", "",
             "| file | shapes | seconds | CPU seconds | load | result | TPU compiler | measured |",
             "|---|---|---|---|---|---|---|---|"]
    for name, f in files:
        said = "-" if f["exit"] is None else "unknown for some rows" if f["compiler_unknown"] else "answered"
        lines.append(f"| {name} | {f['shapes']} | {f['seconds']} | {f.get('cpu_seconds', '-')} | {f.get('load', '-')} | "
                     f"{f['summary'] or 'exit ' + str(f['exit'])} | {said} | {f.get('measured', '-')} {f.get('commit', '')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, help="JSON file (extended when it exists)")
    parser.add_argument("--merge", type=Path, nargs="+", help="no run: the table of these runs' JSON files (a file "
                                                             "measured in several: the last one's row)")
    parser.add_argument("--md", type=Path, help="write the table here too")
    parser.add_argument("--chip", default="v5e")
    parser.add_argument("--limit", type=float, default=600, help="stop a file's check after this many seconds")
    parser.add_argument("--deadline", type=float, default=0, help="start no file after this many seconds")
    parser.add_argument("--only", default="", help="comma-separated file names")
    parser.add_argument("--logs", type=Path, help="a folder for each file's check output")
    ns = parser.parse_args(argv)
    if ns.logs is not None:
        ns.logs.mkdir(parents=True, exist_ok=True)
    if ns.merge:
        data = merged([json.loads(path.read_text()) for path in ns.merge])
    elif ns.folders and ns.out:
        data = run(ns.folders, ns.out, ns.chip, ns.limit, ns.deadline, {s for s in ns.only.split(",") if s}, ns.logs)
    else:
        parser.error("give folders and --out, or --merge")
    text = table(data)
    print(text)
    if ns.md:
        ns.md.write_text(text)
    return 0 if all(within(f) for f in data["files"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
