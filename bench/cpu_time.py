"""CPU seconds of a command and of everything it starts, for the speed benches (no benchmarks here).

On a machine shared with other jobs, wall time measures the load as much as the command; the CPU seconds a
command spends (user + system, its own and those of every process it starts) hardly move with the load. So
the benches report both, each as a multiple of the same figure for a bare `python -c "import torch"`.

Every descendant is counted, even those orphaned before they end (a libtpu worker whose parent left with
`os._exit` and which ends by PDEATHSIG): this process becomes a child subreaper (Linux `prctl`), so orphans
are handed to it and reaped here, and their CPU time lands in `RUSAGE_CHILDREN`. With `per_process`, a
thread samples /proc every 50 ms and reports each descendant's last seen CPU seconds (a process's last
< 50 ms may be missed there; the total is exact). Standard library only; Linux only.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Measured:
    """One run of a command: wall seconds, CPU seconds of it and all its descendants, its output."""

    wall: float
    cpu: float  # user + system seconds, every descendant included
    user: float
    system: float
    returncode: int
    stdout: str
    stderr: str
    processes: list[dict] = field(default_factory=list)  # per_process: pid, ppid, name, cpu (last seen)


def become_subreaper() -> bool:
    """Orphaned descendants are reparented to this process (and reaped by `reap_orphans`)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans(deadline: float) -> bool:
    """Wait for every child this process has left (orphans handed to it) until `deadline`; True when none is
    left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)


def _stat(pid: int) -> tuple[int, str, float] | None:
    """(ppid, comm, CPU seconds) of a live process from /proc/<pid>/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    rest = text[text.rindex(")") + 2 :].split()
    return int(rest[1]), comm, (int(rest[11]) + int(rest[12])) / _TICK


def _cmdline(pid: int) -> str:
    try:
        parts = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    return " ".join(p.decode(errors="replace") for p in parts if p)[-120:]


class _Sampler(threading.Thread):
    """Every descendant of this process, its name and last seen CPU seconds."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: dict[int, dict] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        me = os.getpid()
        while not self.stopped.is_set():
            parents: dict[int, int] = {}
            stats = {}
            for entry in os.scandir("/proc"):
                if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
                    parents[int(entry.name)] = st[0]
                    stats[int(entry.name)] = st
            for pid, (ppid, comm, cpu) in stats.items():
                up, hops = ppid, 0
                while up not in (me, 0, 1) and up in parents and hops < 20:
                    up, hops = parents[up], hops + 1
                if up != me and pid not in self.seen:
                    continue
                row = self.seen.setdefault(pid, {"pid": pid, "ppid": ppid, "name": comm, "cmdline": _cmdline(pid)})
                row["cpu"] = cpu
            self.stopped.wait(0.05)


def measure(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 600,
            per_process: bool = False, cwd: str | None = None) -> Measured:
    """Run `cmd` to its end and every process it started to theirs: wall and CPU seconds."""
    become_subreaper()
    sampler = _Sampler() if per_process else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    if sampler is not None:
        sampler.start()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    wall = time.perf_counter() - start
    complete = reap_orphans(time.monotonic() + 60)
    if sampler is not None:
        sampler.stopped.set()
        sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if not complete:
        print("cpu_time: descendants still running after 60 s; their CPU time is not counted", file=sys.stderr)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    rows = sorted(sampler.seen.values(), key=lambda r: r["pid"]) if sampler is not None else []
    return Measured(wall, user + system, user, system, proc.returncode, proc.stdout, proc.stderr, rows)


def torch_import(runs: int = 3) -> tuple[float, float]:
    """Median wall and median CPU seconds of a bare `python -c "import torch"` (a fresh interpreter each)."""
    got = [measure([sys.executable, "-c", "import torch"]) for _ in range(runs)]
    walls = sorted(m.wall for m in got)
    cpus = sorted(m.cpu for m in got)
    return walls[len(walls) // 2], cpus[len(cpus) // 2]


if __name__ == "__main__":  # python bench/cpu_time.py CMD ...: the command's wall and CPU seconds, per process
    m = measure(sys.argv[1:], per_process=True)
    sys.stdout.write(m.stdout)
    sys.stderr.write(m.stderr)
    for row in m.processes:
        print(f"{row['pid']:>7} {row['ppid']:>7} {row.get('cpu', 0):7.2f} s  {row['name']:<16} {row['cmdline']}")
    print(f"exit {m.returncode}: wall {m.wall:.2f} s, CPU {m.cpu:.2f} s (user {m.user:.2f}, system {m.system:.2f})")
