"""A folder that a child process can read but not write, for tests of read-only caches (no tests here).

For a normal user the folder simply has no write permission. Root ignores file modes, so its child runs
without any of root's capabilities: it is started through a launcher that drops them all from its bounding
set and then execs the child's command (as `setpriv --bounding-set=-all` does), so file modes apply to it as
to anyone, and the folder is root's with mode 0555. (Not a preexec_fn: that runs Python in a fork of the
test process, whose JAX threads can leave it deadlocked before the exec.)"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

# argv[1:] is the command to run once no capability is left to gain at its exec (prctl PR_CAPBSET_DROP = 24;
# past the last capability prctl fails, harmlessly)
_DROP_THEN_EXEC = (
    "import ctypes, os, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "for cap in range(64):\n"
    "    libc.prctl(24, cap, 0, 0, 0)\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


def make_read_only(folder: Path) -> list[str]:
    """Take write permission away from `folder`; returns the prefix of the command line of a child that must
    not be able to write there (nothing unless this process is root)."""
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return [sys.executable, "-c", _DROP_THEN_EXEC] if os.geteuid() == 0 else []


def make_writable(folder: Path) -> None:
    folder.chmod(stat.S_IRWXU)
