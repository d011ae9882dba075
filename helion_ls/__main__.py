"""`helion-ls` / `python -m helion_ls`: the language server over stdio (or TCP for debugging)."""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import sys
from typing import Any

log = logging.getLogger(__name__)

# libtpu, when installed, must never claim this process (or the check worker) nor query a metadata server.
JAX_ENV = {"JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1"}

# Compile threads hold the GIL in long Python stretches; a shorter switch interval keeps the event loop
# (hovers, lenses) responsive while they run.
SWITCH_INTERVAL = 0.002
INITIALIZE_WAIT = 2.0  # seconds to wait for `initialize` before the heavy imports start anyway


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError("expected HOST:PORT, e.g. 127.0.0.1:2087")
    return host or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="helion-ls", description="Language server for Helion TPU kernels.")
    parser.add_argument("--tcp", type=_host_port, metavar="HOST:PORT", help="serve over TCP instead of stdio")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--log-file", help="log here instead of stderr")
    args = parser.parse_args(argv)
    for key, value in JAX_ENV.items():
        os.environ.setdefault(key, value)

    handler = logging.FileHandler(args.log_file) if args.log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level, handlers=[handler])
    logging.getLogger("pygls").setLevel(max(logging.WARNING, logging.getLogger().level))
    sys.setswitchinterval(SWITCH_INTERVAL)

    if args.tcp:
        from .server import create_server
        from .wire.transport import serve_tcp
        from .workers.warmup import parse_warm_up

        server = create_server(remembered=_remembered())
        parse_warm_up()
        serve_tcp(server, *args.tcp, on_exit=lambda: server.close_parts(final=True))
        return
    from .workers import machine_tpu

    machine_tpu.start()  # this machine's TPU, read from sysfs in a thread while the rest starts
    from .workers.prespawn import spawn

    first = spawn()  # the first compile worker, before anything else is imported here (see prespawn.py)
    from .handshake import EarlyReader, load_template, stdio_streams

    stdin, stdout = stdio_streams()
    reader = EarlyReader(stdin, stdout, load_template())
    reader.start()
    remembered = _watch_early(reader)  # before asyncio and the rest: a reopened file's results at once

    from .wire.process_end import run_and_exit  # asyncio, from here on

    run_and_exit(_serve_stdio(reader, stdout, first, remembered))  # never through asyncio.run's teardown


def _remembered() -> Any:
    """The user's analysis cache, as the server reads and writes it (see remembered.py)."""
    from compiler.results import AnalysisCache

    from .session.remembered import Remembered

    return Remembered(AnalysisCache())


def _watch_early(reader: Any) -> Any:
    """Publish remembered results of files opened while the server is built (early.py); the same
    results for the server."""
    remembered = _remembered()
    try:
        from .early import EarlyPublisher

        reader.watch(EarlyPublisher(remembered, reader.send_early))
    except Exception:  # a bug here costs the early publish, never the session
        log.exception("cannot publish remembered results before the server is ready")
    return remembered


async def _serve_stdio(reader: Any, stdout: Any, first: Any, remembered: Any) -> int:
    """The first compile worker started before anything was imported (its imports, torch, are the longest
    part of a cold start) and the compile pool adopts it; the early publisher already publishes the
    remembered results of files opened now. Then `initialize` is answered (the editor gets its answer before
    anything heavy starts), the transport (pygls) is imported in a thread, and the session runs."""
    import asyncio

    from .workers.compile_pool import CompilePool

    pool = CompilePool(first=first)
    pool.start()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, reader.answered.wait, INITIALIZE_WAIT)
    transport = await loop.run_in_executor(None, importlib.import_module, "helion_ls.wire.transport")
    return await transport.serve_early_stdio(
        lambda: build_server(pool, remembered), reader, stdout, on_exit=lambda server: server.close_parts(final=True)
    )


async def build_server(pool: Any, remembered: Any) -> Any:
    """The server's own imports and warm-up parse run in a thread, while the compile workers warm up and
    the handshake's reader answers helion/stats and keeps the rest."""
    import asyncio

    await asyncio.get_running_loop().run_in_executor(None, _import_and_warm_up)
    from .server import create_server

    return create_server(pool, remembered)


def _import_and_warm_up() -> None:
    gc.disable()  # collections scanning torch's objects mid-import would only stretch the imports
    try:
        from . import server  # noqa: F401  (torch, pygls, the compiler's front end)
        from .workers.warmup import parse_warm_up

        parse_warm_up()
    finally:
        gc.enable()


if __name__ == "__main__":
    main()
