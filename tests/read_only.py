"""A folder that a child process can read but not write, for tests of read-only caches (no tests here).

For a normal user the folder simply has no write permission. Root ignores file modes, so its child gets
none of root's capabilities (dropped from the bounding set before exec, as `setpriv --bounding-set=-all`
does): file modes then apply to it as to anyone, and the folder is root's with mode 0555."""

from __future__ import annotations

import ctypes
import os
import stat
from pathlib import Path
from typing import Any

PR_CAPBSET_DROP = 24


def _drop_capabilities() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):  # past the last capability prctl fails, harmlessly
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)


def make_read_only(folder: Path) -> dict[str, Any]:
    """Take write permission away from `folder`; returns the subprocess arguments for a child that must
    not be able to write there."""
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return {"preexec_fn": _drop_capabilities} if os.geteuid() == 0 else {}


def make_writable(folder: Path) -> None:
    folder.chmod(stat.S_IRWXU)
