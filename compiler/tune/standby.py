"""A tuning process kept warm for the language server: `python -m compiler.tune.standby`.

A fresh `helion-pallas tune` spends its first one to two seconds importing torch and the tuner before it
searches anything. This process does those imports once, then forks one child per tuning, which starts
searching at once. Its stdin is one end of a Unix SOCK_SEQPACKET socket pair: each message is a request, the
JSON list of `helion-pallas tune` arguments, carrying two file descriptors (the tuning's stdout and stderr,
pipes the server reads). The child starts a session of its own (the server stops a tuning by killing its
process group), runs the arguments exactly as that command would — same output, same exit status — and
ends. On its own stdout this process writes one JSON line per request, `{"pid": n}` (or `{"error": ...}`),
and one per child that ended, `{"exited": pid, "code": status}` (negative: killed by that signal). Stdin
closed: it ends. Once idle it searches a small kernel of its own (`warm_up`), so that the forks also skip
the compiler's first-use costs. Nothing of the user's is read or run here; only the children run tunings.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import traceback

from ..cli import build_parser  # light: parsing and the front end, no torch
from ..support import lifeline
from .command import import_the_tuner, run

MAX_REQUEST = 64 * 1024
IDLE_POLL = 0.5  # seconds between looks for the end of the forks, while the warm-up waits for them

# A kernel of this module's own (never a user's), searched briefly before serving: the first trace,
# plan, model and search of a process pay for torch's and the compiler's lazy set-up (~0.3 s), which every
# fork would pay again. Its ops are the common ones (a tiled dot loop, a row reduction, exp).
WARM_UP = """
import helion
import helion.language as hl
import torch


# helion: args(x=bf16[512, 1024], w=bf16[1024, 384])
@helion.kernel(static_shapes=True)
def warm_up(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    out = torch.empty([x.size(0), w.size(1)], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([x.size(0), w.size(1)]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(x.size(1)):
            acc = hl.dot(x[tile_m, tile_k], w[tile_k, tile_n], acc=acc)
        top = torch.amax(acc, -1)
        out[tile_m, tile_n] = torch.exp2(acc - top[:, None]).to(out.dtype)
    return out
"""


def _say(message: dict) -> None:
    """One line on stdout in one write: safe from the SIGCHLD handler, whatever the main thread does."""
    os.write(1, (json.dumps(message) + "\n").encode())


_running: set[int] = set()  # forks not yet reaped


def _reap(signum: int, frame: object) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _running.discard(pid)
        _say({"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _child(args: list[str], out: int, err: int, server: int) -> None:
    """In the fork: the tuning's own session and output, then `helion-pallas tune <args>`. Never returns."""
    status = 1
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        lifeline.die_with_parent(server)
        os.environ[lifeline.ENV] = str(os.getpid())  # its gate worker ends with it
        null = os.open(os.devnull, os.O_RDONLY)  # fd 0 again (the channel held it): then it stays as it is
        for fd, target in ((null, 0), (out, 1), (err, 2)):
            if fd != target:
                os.dup2(fd, target)
                os.close(fd)
        ns = build_parser().parse_args(["tune", *args])
        ns.exit_when_done = True  # ends the process once its results are out, as from the command line
        status = run(ns)
    except SystemExit as exc:  # argparse's usage errors
        status = exc.code if isinstance(exc.code, int) else 2
    except BaseException:  # noqa: BLE001 - said on the tuning's stderr; the exit status tells the server
        with open(2, "w", closefd=False) as stderr:
            traceback.print_exc(file=stderr)
    finally:
        os._exit(status)


def serve(channel: socket.socket) -> None:
    """Fork a tuning per request until the channel closes; `warm_up` once no request waits and no fork runs
    (a tuning asked for at once starts at once; the warm-up is for the next ones)."""
    server = os.getpid()
    signal.signal(signal.SIGCHLD, _reap)
    warm = False
    while True:
        if not warm and not select.select([channel], [], [], 0 if not _running else IDLE_POLL)[0]:
            if not _running:
                warm_up()
                warm = True
            continue
        data, fds, _, _ = socket.recv_fds(channel, MAX_REQUEST, 2)
        if not data:
            return
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            _say({"error": f"a request needs 2 file descriptors (stdout, stderr), got {len(fds)}"})
            continue
        try:
            args = json.loads(data)
        except json.JSONDecodeError:
            args = None
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            for fd in fds:
                os.close(fd)
            _say({"error": "a request is a JSON list of `helion-pallas tune` arguments"})
            continue
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # its end is said after its pid
        try:
            pid = os.fork()
        except OSError as exc:  # out of processes or memory: said, and the server starts a tuner itself
            _say({"error": f"cannot fork: {exc}"})
        else:
            if pid == 0:
                channel.close()
                _child(args, *fds, server)
            _running.add(pid)
            _say({"pid": pid})
        finally:
            for fd in fds:
                os.close(fd)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})


def warm_up() -> None:
    """A short search of WARM_UP (static analysis only; nothing runs), then freeze what it made."""
    import gc

    from ..api import load
    from .driver import TuneOptions, TuneRun
    from .executors import InlineExecutor
    from .problem import Problem

    kernel = load(WARM_UP).kernels["warm_up"]
    problem = Problem(WARM_UP, "warm_up", kernel.shape_sets[0], "v7x", None, 0)
    TuneRun(problem, TuneOptions("model", 20, None, 0, 1), executor=InlineExecutor(), store=None, progress=None,
            should_stop=None)
    gc.freeze()  # in every fork, a collection would otherwise scan (and copy) all of it


def main() -> int:
    import_the_tuner()
    serve(socket.socket(fileno=0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
