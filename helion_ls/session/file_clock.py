"""The clock files are stamped with, so that "written after this moment" can be asked of a file's mtime.

Its own module, standard library only: the handshake stamps when `initialize` was answered with it (before
the server's imports) and the configuration feature scans for files written since then.
"""

from __future__ import annotations

import time


def files_clock() -> float:
    """Now, by the clock the kernel stamps file modification times with (Linux: the coarse real-time clock,
    up to a tick behind time.time()): a file written after this moment has an mtime no earlier."""
    coarse = getattr(time, "CLOCK_REALTIME_COARSE", None)
    return time.clock_gettime(coarse) if coarse is not None else time.time()
