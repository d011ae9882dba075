"""Child processes that end when the process that started them ends, however it ends.

A parent that exits cleanly stops its children itself; one that is SIGKILLed or crashes cannot. So a child
asks the kernel to SIGKILL it when its parent dies (Linux `prctl(PR_SET_PDEATHSIG)`; elsewhere a daemon
thread watches the parent pid). The parent opts a child in through the environment (`child_env`); importing
`compiler` calls `hold_from_env()`, before anything heavy is imported. The variable names the parent's pid,
so a child whose parent died before it got that far exits at once; the child then puts its own pid there,
so its children (a tuner's process pool, its eager-reference process) end with it in turn. Standard
library only.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

ENV = "HELION_DIE_WITH_PARENT"
_PR_SET_PDEATHSIG = 1
POLL_SECONDS = 0.5  # where prctl is missing: how often the watching thread checks the parent


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's environment) for a child that must die with this process."""
    return {**(os.environ if env is None else env), ENV: str(os.getpid())}


def hold_from_env() -> None:
    """In a child started with `child_env`: die with the parent from now on (no-op without the variable)."""
    value = os.environ.get(ENV, "")
    if value.isdigit() and int(value) != os.getpid():
        die_with_parent(int(value))
        os.environ[ENV] = str(os.getpid())  # our own children that hold end with us


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when `parent` (its parent) ends; exit now if that already happened."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        except (OSError, AttributeError):
            _watch(parent)
    else:
        _watch(parent)
    if os.getppid() != parent:  # the parent died before the request above took effect
        os._exit(1)


def _watch(parent: int) -> None:
    def run() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=run, name="helion-lifeline", daemon=True).start()
