"""The first compile worker, started before the server imports anything else.

Its imports (torch) are the longest part of a cold start, so `python -m helion_ls` spawns it with the
standard library first thing, and the compile pool adopts it (worker_process.WorkerProcess.adopt) once
asyncio is running. Imports only the standard library and `compiler.support.lifeline` (through the light
`compiler` package).
"""

from __future__ import annotations

import subprocess
import sys

from compiler.support import lifeline

COMPILE_WORKER = "helion_ls.workers.compile_worker"


def spawn(module: str = COMPILE_WORKER) -> subprocess.Popen:
    """`python -m <module>` in its own process group, dying with this process, speaking over pipes."""
    return subprocess.Popen(
        [sys.executable, "-m", module],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=lifeline.child_env(),
    )
