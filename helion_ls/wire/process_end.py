"""The server process's end: from inside its event loop, never after `asyncio.run`'s teardown.

`asyncio.run` first cancels every task still pending and waits for them all. A task that is starting a
subprocess (`asyncio.create_subprocess_exec` between the fork and the connection of the child's pipes, such as
the standby tuner wanted once a file's analysis is final) never ends when that connection is cancelled with
it (CPython gh-125502: the transport waits forever for pipes that were never connected). The server would
then hang after its last client left: its client waits for it forever (a test's teardown until the
timeout kills the test worker) and the process outlives them all. So `run_and_exit` runs the session as
the loop's main coroutine and ends the process in that coroutine, once the session is over or failed: no
pending task, thread, child or stuck read can keep the process alive. Standard library only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn

log = logging.getLogger(__name__)


def exit_process(code: int) -> NoReturn:
    """Leave now: a reader thread blocked on stdin or an abandoned worker thread must not keep us alive."""
    logging.shutdown()
    sys.stderr.flush()
    os._exit(code)


def run_and_exit(main: Coroutine[Any, Any, int]) -> NoReturn:
    """Run `main` (the session; its result is the exit code) in a new event loop, then end the process with
    that code (1 if it failed) before the loop's teardown."""

    async def run() -> NoReturn:
        code = 1
        try:
            code = await main
        except BaseException:  # noqa: BLE001 - logged; the process ends all the same
            log.exception("the server failed")
        exit_process(code)

    try:
        asyncio.run(run())
    except BaseException:  # noqa: BLE001 - the loop itself failed
        log.exception("the server failed")
    exit_process(1)
