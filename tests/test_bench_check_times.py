"""bench/check_times.py and bench/idle_waits.py (Linux /proc): a check stopped at the limit still has its CPU
seconds, its children's among them (a killed process's children are never reaped into anyone's count), and none
of its processes is left; the bar is counted by CPU seconds; idle waits are told from CPU work."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import check_times  # noqa: E402
import idle_waits  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

# a parent that starts a child burning CPU and then waits for it
PARENT = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'while True: pass']).wait()")


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_stopped_tree_gives_its_childrens_cpu_seconds_and_is_gone():
    parent = subprocess.Popen([sys.executable, "-c", PARENT])
    try:
        deadline = time.monotonic() + 120
        child = None
        while time.monotonic() < deadline:  # the condition: the child has burnt a second of CPU
            kids = idle_waits.tree(parent.pid)[1:]
            if kids:
                child = kids[0]
                if _cpu_of(child) >= 1.0:
                    break
            time.sleep(0.05)
        assert child is not None and _cpu_of(child) >= 1.0
        used = check_times._stop_tree(parent.pid)
        assert used >= 1.0  # the child's, which the parent never reaped
        assert parent.wait(timeout=60) != 0
        deadline = time.monotonic() + 60
        while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":  # killed, waiting for init to reap it
                break
            time.sleep(0.05)
        assert not Path(f"/proc/{child}").exists() or state == "Z"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_the_bar_is_counted_by_cpu_seconds_or_idle_wall_time():
    row = {"seconds": 250.0, "cpu_seconds": 40.0, "exit": 0}
    assert check_times.within(row)
    assert not check_times.within({**row, "cpu_seconds": 61.0})
    assert not check_times.within({**row, "exit": None})  # stopped: never within
    # measured on an idle machine, its wall time is the check's own (libtpu's compile beside interpret mode)
    assert check_times.within({**row, "seconds": 59.1, "cpu_seconds": 75.0, "load": 0.4})
    assert not check_times.within({**row, "seconds": 59.1, "cpu_seconds": 75.0, "load": 3.0})
    assert not check_times.within({**row, "seconds": 61.0, "cpu_seconds": 75.0, "load": 0.4})
    text = check_times.table({"date": "d", "chip": "v5e", "cores": 2, "files": {
        "a.py": {**row, "shapes": "file", "load": 9.0, "summary": "1 passed, 0 failed", "compiler_unknown": []},
        "b.py": {**row, "cpu_seconds": 70.0, "shapes": "file", "load": 9.0, "summary": "1 passed, 0 failed",
                 "compiler_unknown": []}}})
    assert text.startswith("1 of 2 files within 60 s on an idle machine (CPU seconds, or wall time measured idle); "
                           "0 within 60 s of wall time as measured"), text
    assert text.index("| b.py |") < text.index("| a.py |")  # slowest first by CPU seconds


def test_idle_waits_tell_sleeping_from_working():
    slept = idle_waits.measure([sys.executable, "-c", "import time; time.sleep(3)"], 0.01)
    worked = idle_waits.measure([sys.executable, "-c", "import time\nt = time.process_time()\n"
                                 "while time.process_time() - t < 3: pass"], 0.01)
    assert slept["idle_s"] >= 0.5 * slept["wall_s"] and slept["cpu_s"] < 1.5, slept
    assert worked["idle_s"] <= 0.2 * worked["wall_s"] and worked["cpu_s"] >= 2.5, worked
