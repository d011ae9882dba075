"""How long a command waits on nothing: it runs the command and samples every thread of it and of its child
processes (the reference process, libtpu's worker) a hundred times a second; a sample in which none of them is
runnable ('R': running, or ready and waiting for a core) is a moment the command waits on something that is not
CPU work (a disk read, a timer, a process outside its tree). On a machine where nothing else runs, the
command's wall time is then at most its CPU seconds plus those idle seconds: the claim docs/check-times.md makes
for `helion-pallas check` (Linux only: it reads /proc).

    python bench/idle_waits.py [--interval 0.01] -- COMMAND ...
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def tree(root: int) -> list[int]:
    """`root` and every process under it (through each thread's children: a thread may start a process)."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except OSError:
                continue
    return found


def runnable(pids: list[int]) -> int:
    """How many threads of `pids` are runnable now."""
    count = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue
            count += stat[stat.rindex(")") + 2] == "R"
    return count


def measure(command: list[str], interval: float) -> dict[str, float]:
    """Wall seconds, CPU seconds (user + system of the command and the children it waited for), and the seconds
    sampled with no thread of its tree runnable."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    samples = idle = 0
    while proc.poll() is None:
        samples += 1
        idle += runnable(tree(proc.pid)) == 0
        time.sleep(interval)  # the sampler's own pace, not a synchronisation
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "samples": samples,
            "idle_s": round(wall * idle / max(samples, 1), 1), "load": round(os.getloadavg()[0], 1),
            "exit": proc.returncode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=0.01)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    command = ns.command[1:] if ns.command[:1] == ["--"] else ns.command
    if not command:
        parser.error("give a command after --")
    print(json.dumps(measure(command, ns.interval)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
