"""The server's process ends when its session does, even with a subprocess still starting at that moment.

A task inside `asyncio.create_subprocess_exec` (forked, the child's pipes not yet connected: the standby
tuner starting, wanted once a file's analysis is final) never ends when `asyncio.run`'s teardown cancels it
together with that connection (CPython gh-125502). A server that ended through that teardown hung
forever after `exit`: its client (a test's fixture teardown) waited until the test timeout killed the
whole test worker ("node down: Not properly terminated"). process_end.run_and_exit ends the process
from inside the loop instead. Here `python -m helion_ls`'s entry point and the TCP server each end a
session at that moment (the TCP server: its client leaves while its parts stop), in a process of their
own.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

from test_ls_support import REPO

ENDS_WITHIN = 60.0  # seconds; a hung process fails here, not at the test timeout

# Each script's start: tasks that start one subprocess after another, each a loop iteration after the one
# before, so that whenever the session ends, one of them is starting (forked, its pipes being connected).
STARTING = """
import asyncio
import sys


async def keep_starting(steps_later: int) -> None:
    for _ in range(steps_later):
        await asyncio.sleep(0)
    while True:
        await asyncio.create_subprocess_exec(sys.executable, "-c", "pass", stdout=asyncio.subprocess.PIPE)


async def subprocess_starting() -> None:
    for steps_later in range(4):
        asyncio.ensure_future(keep_starting(steps_later))
    await asyncio.sleep(0)  # the first one is forked
"""

STDIO = """
import helion_ls.__main__ as entry
import helion_ls.workers.prespawn as prespawn

prespawn.spawn = lambda module=None: None  # no compile worker: the session below needs none


async def session(*args: object) -> int:
    await subprocess_starting()
    return 3


entry._serve_stdio = session
entry.main([])
"""

TCP = """
import logging
import types

from helion_ls.wire.transport import serve_tcp

logging.basicConfig(level=logging.INFO)


async def on_exit() -> None:  # the server's parts stopping: a subprocess starts meanwhile
    await subprocess_starting()


protocol = types.SimpleNamespace(set_writer=lambda writer: None, _shutdown=False)
serve_tcp(types.SimpleNamespace(protocol=protocol), "127.0.0.1", 0, on_exit)
"""


def start_script(source: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", STARTING + textwrap.dedent(source)],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def ended(proc: subprocess.Popen) -> tuple[int, str]:
    """Its exit code and stderr; fails if it did not end within ENDS_WITHIN seconds."""
    try:
        _, err = proc.communicate(timeout=ENDS_WITHIN)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"did not end within {ENDS_WITHIN:.0f} s: {err[-2000:]}") from None
    return proc.returncode, err


def test_the_stdio_server_ends_with_its_session_while_a_subprocess_starts():
    code, err = ended(start_script(STDIO))
    assert code == 3, err[-3000:]


def test_the_tcp_server_ends_with_its_client_while_a_subprocess_starts():
    proc = start_script(TCP)
    assert proc.stderr is not None
    while "serving on" not in (line := proc.stderr.readline()):
        assert line, "the TCP server did not start"
    port = int(line.rsplit(", ", 1)[1].rstrip(")\n"))
    socket.create_connection(("127.0.0.1", port), timeout=10).close()  # the client leaves without `exit`
    code, err = ended(proc)
    assert code == 1 and "the client closed the connection" in err, err[-3000:]


async def test_a_server_that_does_not_exit_fails_its_test_in_a_minute_not_its_worker_in_ten(monkeypatch) -> None:
    """The fixtures end their sessions with test_ls_support.end_session: a server still running after the
    client's shutdown and exit is killed and the test fails, instead of the client waiting until pytest-timeout
    kills the whole xdist worker."""
    import asyncio

    import pytest
    import test_ls_support

    class Hanging:  # what pytest-lsp's client does with a server that never exits: wait on it
        def __init__(self, server: asyncio.subprocess.Process) -> None:
            self._server = server

        async def shutdown_session(self) -> None:
            await self._server.wait()

    server = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(600)")
    monkeypatch.setattr(test_ls_support, "SHUTDOWN_SECONDS", 0.5)
    with pytest.raises(pytest.fail.Exception, match="did not exit within 0.5 s"):
        await test_ls_support.end_session(Hanging(server))
    assert await asyncio.wait_for(server.wait(), 10) != 0  # killed
