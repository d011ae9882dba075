"""Language-server latency, measured the way an editor sees it: over stdio, against `python -m helion_ls`.

For the attention example and a 10-kernel file, each round edits one kernel (a real change of its
normalised source), saves, and times didSave -> first-stage diagnostics (front end, codegen, VMEM) and
didSave -> last diagnostics (after lowering and, with --libtpu, the libtpu compile). Hovers (kernel,
tensor access, tile loop) are timed on cached results. Then a tuning run is started (model evaluator)
and hovers are timed again while it runs, with the server's own event-loop lag record. Reports p50/p95
and the server's (and its check worker's) RSS.

Speed is measured against this machine: a bare `python -c "import torch"` is timed first (median of 3),
and every start-up figure is printed in seconds and as a multiple of it, with the load average.

First, the cold start (`--cold-runs`, each a fresh server process with an empty analysis cache: the file
was never seen): process spawn -> `initialize` answered, and spawn -> first diagnostics for
examples/attention.py (opened right after `initialized`): the first publishDiagnostics, i.e. the front
stage's partial publish once its first shape set compiled (attention.py has nothing for the parse-only
publish to show, and a server publishes nothing before it has a result: never an empty placeholder), and
spawn -> the front stage complete; with `helion/stats` asked every 0.2 s meanwhile (its slowest answer is
reported) and the machine's 1-minute load average at the spawn.

Then the reopen (`--reopen-runs`): one server analyses examples/attention.py and a file of
`--reopen-kernels` kernels (200: bench/ls_hostile.py's) with every stage, the libtpu compile included
(`--no-reopen-libtpu` leaves it out), and ends its session; then each run starts a fresh server on the same
analysis cache and opens each file: didOpen -> first diagnostics, and didOpen -> the final stage.

Goals: never-seen file: first diagnostics <= 1.0x the torch import (median of the cold runs, idle machine);
reopened file: first diagnostics <= 0.3 s after didOpen, every stage (libtpu included) final <= 1 s;
initialize <= 300 ms; hover p95 <= 50 ms; first-stage diagnostics p95 <= 300 ms on the 10-kernel file; the
event loop never blocked > 50 ms while tuning runs.

  python bench/ls_latency.py [--cold-runs 3] [--reopen-runs 3] [--reopen-kernels 200] [--no-reopen-libtpu]
                             [--rounds 50] [--final-rounds 5] [--libtpu] [--tune-seconds 20] [--json out.json]
                             (--rounds 0: start-up figures only)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from machine import figure, load_average, torch_import_seconds, yardstick_line
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "tests" / "test_ls_seeds"  # the seed kernels as the ls tests use them (<name>.py.txt)
HEADER = "import math\n\nimport torch\n\nimport helion\nimport helion.language as hl\n\n\n"
KERNEL_SECTION = re.compile(r"(# helion: args.*?)(?=\n\ndef reference|\Z)", re.S)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": pct(values, 0.5),
        "p95": pct(values, 0.95),
        "max": max(values, default=0),
    }


def ten_kernel_file() -> str:
    """The six seed kernels plus four renamed copies: ten distinct kernels, 14 shape sets."""
    sections = {}
    for path in sorted(SEEDS.glob("*.py.txt")):
        match = KERNEL_SECTION.search(path.read_text())
        if match:
            sections[path.name.removesuffix(".py.txt")] = match.group(1).rstrip() + "\n"
    parts = list(sections.values())
    for name in ["add", "softmax", "bmm", "batch_softmax"]:
        parts.append(re.sub(rf"\bdef {name}\(", f"def {name}_copy(", sections[name]))
    return HEADER + "\n\n".join(parts)


def edit_kernel(text: str, kernel: str, round_no: int) -> str:
    """Insert (or renumber) a host statement at the top of `kernel`'s body: a real source change."""
    text = re.sub(
        rf"(def {kernel}\((?:.|\n)*?\) -> .*?:\n)(    bench_round = \d+\n)?",
        rf"\1    bench_round = {round_no}\n",
        text,
        count=1,
    )
    return text


def kernel_names(text: str) -> list[str]:
    return re.findall(r"@helion\.kernel\(.*?\)\ndef (\w+)\(", text)


def rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Bench:
    def __init__(self, ws: Path, libtpu: bool):
        self.ws = ws
        self.libtpu = libtpu
        self.client = LanguageClient("ls-latency-bench", "1")
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}
        self.stage_times: dict[tuple[str, int, str], float] = {}
        self.events = asyncio.Event()
        self.tuning: list[dict] = []
        c = self.client

        @c.feature("helion/diagnosticsStage")
        def stage(params: Any) -> None:
            get = (lambda k: params[k]) if isinstance(params, dict) else (lambda k: getattr(params, k))
            self.stage_times[(get("uri"), get("version"), get("stage"))] = time.perf_counter()
            if get("final"):
                self.stage_times[(get("uri"), get("version"), "final")] = time.perf_counter()
            self.events.set()

        @c.feature("helion/tuningState")
        def tuning(params: Any) -> None:
            self.tuning.append(params._asdict() if hasattr(params, "_asdict") else dict(params))
            self.events.set()

        @c.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def diagnostics(params: types.PublishDiagnosticsParams) -> None:
            pass

        @c.feature(types.WORKSPACE_CODE_LENS_REFRESH)
        def refresh(params: Any) -> None:
            return None

        @c.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def progress_create(params: Any) -> None:
            return None

        @c.feature(types.PROGRESS)
        def progress(params: Any) -> None:
            pass

        @c.feature(types.WINDOW_SHOW_MESSAGE)
        def message(params: Any) -> None:
            pass

        @c.feature(types.WINDOW_LOG_MESSAGE)
        def log(params: Any) -> None:
            pass

    async def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
        await self.client.start_io(sys.executable, "-m", "helion_ls", "--log-level", "WARNING", env=env)
        caps = types.ClientCapabilities(
            window=types.WindowClientCapabilities(work_done_progress=True),
            workspace=types.WorkspaceClientCapabilities(
                code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=True)
            ),
        )
        await self.client.initialize_async(
            types.InitializeParams(
                capabilities=caps,
                root_uri=self.ws.as_uri(),
                initialization_options={
                    "storePath": str(self.ws / ".store" / "tuning.sqlite"),
                    "libtpu": self.libtpu,
                    "evaluator": "model",
                },
            )
        )
        self.client.initialized(types.InitializedParams())

    async def wait(self, key: tuple[str, int, str], timeout: float = 600) -> float:
        deadline = time.monotonic() + timeout
        while key not in self.stage_times:
            self.events.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {key[2]} diagnostics for version {key[1]} within {timeout} s")
            try:
                await asyncio.wait_for(self.events.wait(), remaining)
            except TimeoutError:
                pass
        return self.stage_times[key]

    def open(self, name: str, text: str) -> str:
        path = self.ws / name
        path.write_text(text)
        uri = path.as_uri()
        self.versions[uri] = 1
        self.texts[uri] = text
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            )
        )
        return uri

    async def save_round(self, uri: str, text: str, want_final: bool) -> tuple[float, float | None]:
        self.versions[uri] += 1
        version = self.versions[uri]
        self.texts[uri] = text
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        start = time.perf_counter()
        self.client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        front = await self.wait((uri, version, "front")) - start
        final = (await self.wait((uri, version, "final")) - start) if want_final else None
        return front * 1e3, (final * 1e3 if final is not None else None)

    async def hover_ms(self, uri: str, needle: str, offset: int) -> float:
        text = self.texts[uri]
        at = text.index(needle) + offset
        pos = types.Position(line=text[:at].count("\n"), character=at - (text.rfind("\n", 0, at) + 1))
        start = time.perf_counter()
        result = await self.client.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=pos)
        )
        elapsed = (time.perf_counter() - start) * 1e3
        if result is None:
            raise RuntimeError(f"no hover at {needle!r}")
        return elapsed

    async def stats(self, reset: bool = False) -> dict:
        got = await self.client.protocol.send_request_async("helion/stats", {"reset": reset})
        return got._asdict() if hasattr(got, "_asdict") else dict(got)

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def frame(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


async def read_message(stream: asyncio.StreamReader) -> dict | None:
    length = 0
    while True:
        line = await stream.readline()
        if not line:
            return None
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
        elif line in (b"\r\n", b"\n") and length:
            return json.loads(await stream.readexactly(length))


async def cold_start(ws: Path) -> dict[str, float]:
    """One fresh server with an empty analysis cache: ms from spawn to the initialize answer and to
    attention.py's first diagnostics."""
    source = (REPO / "examples" / "attention.py").read_text()
    path = ws / "attention.py"
    path.write_text(source)
    load = os.getloadavg()[0]  # the machine is shared: a figure means little without it
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "helion_ls", "--log-level", os.environ.get("HELION_LS_BENCH_LOG", "WARNING"),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None if os.environ.get("HELION_LS_BENCH_LOG") else asyncio.subprocess.DEVNULL,
        env=server_env(ws / "analysis.sqlite"), limit=64 * 1024 * 1024,
    )
    assert proc.stdin is not None and proc.stdout is not None
    out: dict[str, float] = {"load_average_1min": load}
    stats_sent: dict[int, float] = {}
    stats_ms: list[float] = []
    init = {
        "processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": {},
        "initializationOptions": {"storePath": str(ws / ".store" / "cold.sqlite"), "libtpu": False},
    }
    proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))

    async def ask_stats() -> None:
        for i in range(1000, 1600):
            stats_sent[i] = time.perf_counter()
            proc.stdin.write(frame({"jsonrpc": "2.0", "id": i, "method": "helion/stats", "params": {}}))
            await asyncio.sleep(0.2)

    asker: asyncio.Task | None = None
    try:
        while (msg := await asyncio.wait_for(read_message(proc.stdout), 120)) is not None:
            now = time.perf_counter()
            if msg.get("id") == 1 and "method" not in msg:
                out["initialize_ms"] = (now - t0) * 1e3
                proc.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
                doc = {"uri": path.as_uri(), "languageId": "python", "version": 1, "text": source}
                proc.stdin.write(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": doc}}))
                out["did_open_ms"] = (time.perf_counter() - t0) * 1e3
                asker = asyncio.ensure_future(ask_stats())
            elif msg.get("id") in stats_sent and "method" not in msg:
                stats_ms.append((now - stats_sent.pop(msg["id"])) * 1e3)
            elif "method" in msg and "id" in msg:  # a request from the server (configuration, progress)
                proc.stdin.write(frame({"jsonrpc": "2.0", "id": msg["id"], "result": None}))
            elif msg.get("method") == "textDocument/publishDiagnostics" and msg["params"]["uri"] == path.as_uri():
                out.setdefault("first_diagnostics_ms", (now - t0) * 1e3)
            elif msg.get("method") == "helion/diagnosticsStage" and msg["params"]["stage"] == "front":
                out["front_stage_ms"] = (now - t0) * 1e3
                break
    finally:
        if asker is not None:
            asker.cancel()
        proc.kill()
        await proc.wait()
    late = [(time.perf_counter() - sent) * 1e3 for sent in stats_sent.values()]
    out["slowest_stats_ms"] = max(stats_ms + late, default=float("nan"))
    return out


def server_env(cache: Path) -> dict[str, str]:
    """The environment of a server the benchmark starts: this repository, and its own analysis cache."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]), "HELION_LS_ANALYSIS_CACHE": str(cache)}


async def session(ws: Path, cache: Path, path: Path, libtpu: bool) -> dict[str, float]:
    """One server on one file: seconds from didOpen to its first diagnostics and to its final stage; the
    session ends as an editor ends it (shutdown, exit), so what the server found is kept."""
    text = path.read_text()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "helion_ls", "--log-level", "WARNING", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=server_env(cache), limit=2**26,
    )
    assert proc.stdin is not None and proc.stdout is not None
    init = {"processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": {},
            "initializationOptions": {"storePath": str(ws / ".store" / "reopen.sqlite"), "libtpu": libtpu}}
    proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
    out: dict[str, float] = {"load_average_1min": os.getloadavg()[0]}
    opened = 0.0
    try:
        while (msg := await asyncio.wait_for(read_message(proc.stdout), 3600)) is not None:
            now = time.perf_counter()
            if msg.get("id") == 1 and "method" not in msg:
                proc.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
                doc = {"uri": path.as_uri(), "languageId": "python", "version": 1, "text": text}
                proc.stdin.write(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": doc}}))
                opened = time.perf_counter()
            elif "method" in msg and "id" in msg:
                proc.stdin.write(frame({"jsonrpc": "2.0", "id": msg["id"], "result": None}))
            elif msg.get("method") == "textDocument/publishDiagnostics" and msg["params"]["uri"] == path.as_uri():
                out.setdefault("first_s", now - opened)
            elif msg.get("method") == "helion/diagnosticsStage" and msg["params"]["final"]:
                out["final_s"] = now - opened
                break
        if "final_s" not in out:
            raise RuntimeError(f"the server ended before the final diagnostics of {path.name}")
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None}))
        while (msg := await asyncio.wait_for(read_message(proc.stdout), 60)) is not None and msg.get("id") != 2:
            pass
        proc.stdin.write(frame({"jsonrpc": "2.0", "method": "exit", "params": None}))
        await asyncio.wait_for(proc.wait(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    return out


async def reopen(root: Path, runs: int, kernels: int, libtpu: bool) -> dict[str, Any]:
    """A file analysed by one server, then opened by fresh servers on the same analysis cache."""
    from ls_hostile import many_kernels

    ws = root / "reopen"
    ws.mkdir()
    cache = ws / "analysis.sqlite"
    files = {"attention.py": (REPO / "examples" / "attention.py").read_text(),
             f"{kernels}_kernels.py": many_kernels(kernels)}
    out: dict[str, Any] = {"libtpu": libtpu, "kernels": kernels}
    for name, text in files.items():
        path = ws / name
        path.write_text(text)
        first = await session(ws, cache, path, libtpu)
        out[name] = {"first_analysis_final_s": first["final_s"], "runs": []}
        for _ in range(runs):
            out[name]["runs"].append(await session(ws, cache, path, libtpu))
    return out


HOVERS = [("def attention", 5), ("k_view[tile_b, tile_n, :]", 2), ("hl.tile(n_dim)", 3)]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    ws = Path(tempfile.mkdtemp(prefix="helion-ls-bench-"))
    os.environ["HELION_LS_ANALYSIS_CACHE"] = str(ws / "analysis.sqlite")  # the rounds' server: nothing remembered
    bench = Bench(ws, args.libtpu)
    out: dict[str, Any] = {"rounds": args.rounds, "final_rounds": args.final_rounds, "libtpu": args.libtpu}
    out["torch_import_s"] = torch_import_seconds()
    out["load_average_1min"] = load_average()
    out["cold"] = [await cold_start(Path(tempfile.mkdtemp(prefix="helion-ls-cold-"))) for _ in range(args.cold_runs)]
    if args.reopen_runs > 0:
        out["reopen"] = await reopen(Path(tempfile.mkdtemp(prefix="helion-ls-reopen-")), args.reopen_runs,
                                     args.reopen_kernels, args.reopen_libtpu)
    if args.rounds <= 0:
        return out
    try:
        t0 = time.perf_counter()
        await bench.start()
        out["startup_ms"] = (time.perf_counter() - t0) * 1e3

        attention = (SEEDS / "attention.py.txt").read_text()
        uri = bench.open("attention.py", attention)
        start = time.perf_counter()
        await bench.wait((uri, 1, "final"))
        out["attention_open_to_final_ms"] = (time.perf_counter() - start) * 1e3
        await asyncio.sleep(0.5)  # the first full garbage collection after start-up belongs to start-up
        out["max_loop_lag_ms_at_startup"] = (await bench.stats(reset=True))["maxLoopLagMs"]
        fronts, finals = [], []
        for r in range(args.rounds):
            front, final = await bench.save_round(
                uri, edit_kernel(attention, "attention", r), r < args.final_rounds
            )
            fronts.append(front)
            if final is not None:
                finals.append(final)
        out["attention_save_to_first_stage_ms"] = summary(fronts)
        out["attention_save_to_last_stage_ms"] = summary(finals)
        hovers: dict[str, list[float]] = {needle: [] for needle, _ in HOVERS}
        for _ in range(args.rounds):
            for needle, offset in HOVERS:
                hovers[needle].append(await bench.hover_ms(uri, needle, offset))
        out["attention_hover_ms"] = {k: summary(v) for k, v in hovers.items()}

        many = ten_kernel_file()
        names = kernel_names(many)
        out["ten_kernel_file_kernels"] = names
        muri = bench.open("ten_kernels.py", many)
        start = time.perf_counter()
        await bench.wait((muri, 1, "final"))
        out["ten_kernels_open_to_final_ms"] = (time.perf_counter() - start) * 1e3
        fronts, finals = [], []
        for r in range(args.rounds):
            edited = edit_kernel(many, names[r % len(names)], r)
            front, final = await bench.save_round(muri, edited, r < args.final_rounds)
            fronts.append(front)
            if final is not None:
                finals.append(final)
        out["ten_kernels_save_to_first_stage_ms"] = summary(fronts)
        out["ten_kernels_save_to_last_stage_ms"] = summary(finals)
        whole = []
        for r in range(min(args.rounds, 10)):  # every kernel changed at once: the worst case
            edited = many
            for name in names:
                edited = edit_kernel(edited, name, 1000 + r)
            front, _ = await bench.save_round(muri, edited, False)
            whole.append(front)
        out["ten_kernels_all_changed_first_stage_ms"] = summary(whole)
        hover_many = [await bench.hover_ms(muri, "def bmm", 5) for _ in range(args.rounds)]
        out["ten_kernels_hover_ms"] = summary(hover_many)
        stats = await bench.stats()
        out["server_rss_bytes"] = rss(stats["pid"])
        out["check_worker_rss_bytes"] = rss(stats["checkWorkerPid"]) if stats.get("checkWorkerPid") else 0
        out["max_loop_lag_ms_during_compiles"] = stats["maxLoopLagMs"]
        out["max_gc_pause_ms"] = stats["maxGcPauseMs"]

        if args.tune_seconds > 0:
            out["during_tuning"] = await tune_phase(bench, uri, args)
        out["server_rss_bytes_end"] = rss((await bench.stats())["pid"])
    finally:
        await bench.stop()
        shutil.rmtree(ws, ignore_errors=True)
    return out


async def tune_phase(bench: Bench, uri: str, args: argparse.Namespace) -> dict[str, Any]:
    """Hovers and loop lag while a tuner runs (model evaluator)."""
    bench.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"helion": {"tuneBudgetSeconds": args.tune_seconds}})
    )
    await asyncio.sleep(0.2)
    await bench.stats(reset=True)
    bench.tuning.clear()
    await bench.client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="helion.tune", arguments=[{"uri": uri, "kernel": "attention", "shapeSet": 0}]
        )
    )
    hovers: list[float] = []
    deadline = time.monotonic() + args.tune_seconds * 3 + 60
    while time.monotonic() < deadline:
        if any(t["state"] in ("done", "failed", "cancelled", "stale") for t in bench.tuning):
            break
        for needle, offset in HOVERS:
            hovers.append(await bench.hover_ms(uri, needle, offset))
        await asyncio.sleep(0.05)
    stats = await bench.stats()
    final = next(
        (t for t in reversed(bench.tuning) if t["state"] in ("done", "failed", "cancelled", "stale")), None
    )
    return {
        "final_state": final["state"] if final else "still running",
        "message": final.get("message") if final else None,
        "evaluated": final.get("evaluated") if final else None,
        "hover_ms": summary(hovers),
        "max_loop_lag_ms": stats["maxLoopLagMs"],
        "slow_ticks_over_5ms": stats["slowTicks"],
    }


def report(out: dict[str, Any]) -> str:
    base = out["torch_import_s"]
    lines = [yardstick_line(base) + f" (at the start: {out['load_average_1min']:.2f})"]
    colds = out.get("cold", [])
    for i, cold in enumerate(colds):
        lines.append(
            f"cold start {i + 1} (never-seen file, empty cache): initialize {cold['initialize_ms']:.0f} ms, "
            f"first diagnostics {figure(cold['first_diagnostics_ms'] / 1e3, base)} after the spawn "
            f"({(cold['first_diagnostics_ms'] - cold['did_open_ms']) / 1e3:.3f} s after didOpen), front stage "
            f"{cold['front_stage_ms'] / 1e3:.3f} s, slowest helion/stats {cold['slowest_stats_ms']:.0f} ms "
            f"(load average {cold['load_average_1min']:.2f})"
        )
    if colds:
        median = statistics.median(c["first_diagnostics_ms"] / 1e3 for c in colds)
        lines.append(f"cold start, median first diagnostics: {figure(median, base)} (goal <= 1.0x): "
                     f"{'met' if median <= base else 'NOT MET'}")
    reopened = out.get("reopen")
    if reopened:
        stages = "every stage, libtpu included" if reopened["libtpu"] else "front and lowering stages"
        for name in [k for k in reopened if k.endswith(".py")]:
            got = reopened[name]
            lines.append(f"reopen {name} ({stages}; the first analysis took {got['first_analysis_final_s']:.1f} s):")
            for i, r in enumerate(got["runs"]):
                lines.append(f"  run {i + 1}: didOpen -> first diagnostics {figure(r['first_s'], base)}, -> final "
                             f"{figure(r['final_s'], base)} (load average {r['load_average_1min']:.2f})")
            first = statistics.median(r["first_s"] for r in got["runs"])
            final = statistics.median(r["final_s"] for r in got["runs"])
            lines.append(f"  median: first {first:.3f} s (goal <= 0.3 s: {'met' if first <= 0.3 else 'NOT MET'}), "
                         f"final {final:.3f} s (goal <= 1 s: {'met' if final <= 1.0 else 'NOT MET'})")
    if args_rounds(out) <= 0:
        return "\n".join(lines)

    def row(name: str, s: dict) -> None:
        lines.append(
            f"{name:<48} p50 {s['p50']:8.1f} ms   p95 {s['p95']:8.1f} ms   max {s['max']:8.1f} ms   n={s['n']}"
        )

    lines.append(f"server start + initialize: {out['startup_ms']:.0f} ms")
    lines.append(f"attention open -> last diagnostics: {out['attention_open_to_final_ms']:.0f} ms")
    row("attention didSave -> first-stage diagnostics", out["attention_save_to_first_stage_ms"])
    row("attention didSave -> last diagnostics", out["attention_save_to_last_stage_ms"])
    for needle, s in out["attention_hover_ms"].items():
        row(f"attention hover on {needle!r}", s)
    lines.append(f"10-kernel file open -> last diagnostics: {out['ten_kernels_open_to_final_ms']:.0f} ms")
    row("10 kernels didSave (one edited) -> first stage", out["ten_kernels_save_to_first_stage_ms"])
    row("10 kernels didSave (one edited) -> last stage", out["ten_kernels_save_to_last_stage_ms"])
    row("10 kernels didSave (all edited) -> first stage", out["ten_kernels_all_changed_first_stage_ms"])
    row("10 kernels hover on a kernel", out["ten_kernels_hover_ms"])
    mib = 1024 * 1024
    lines.append(
        f"RSS: server {out['server_rss_bytes'] / mib:.0f} MiB (end {out['server_rss_bytes_end'] / mib:.0f} MiB), "
        f"check worker {out['check_worker_rss_bytes'] / mib:.0f} MiB"
    )
    lines.append(f"max event-loop lag: first open (imports) {out['max_loop_lag_ms_at_startup']:.1f} ms, ")
    lines[-1] += f"then during edits/compiles/hovers {out['max_loop_lag_ms_during_compiles']:.1f} ms"
    lines.append(f"longest garbage-collection pause: {out['max_gc_pause_ms']:.1f} ms")
    tune = out.get("during_tuning")
    if tune:
        lines.append(f"tuning: {tune['final_state']} ({tune['evaluated']} evaluated) {tune['message'] or ''}")
        row("hover while tuning", tune["hover_ms"])
        lines.append(f"max event-loop lag while tuning: {tune['max_loop_lag_ms']:.1f} ms")
    return "\n".join(lines)


def args_rounds(out: dict[str, Any]) -> int:
    return int(out.get("rounds", 0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cold-runs", type=int, default=3, help="fresh servers timed from spawn")
    parser.add_argument("--reopen-runs", type=int, default=3, help="fresh servers on files analysed before")
    parser.add_argument("--reopen-kernels", type=int, default=200, help="kernels in the large reopened file")
    parser.add_argument("--no-reopen-libtpu", dest="reopen_libtpu", action="store_false",
                        help="analyse the reopened files without the libtpu stage")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument(
        "--final-rounds", type=int, default=5, help="rounds that also wait for the last stage"
    )
    parser.add_argument("--libtpu", action="store_true", help="include the libtpu compile stage")
    parser.add_argument("--tune-seconds", type=float, default=20.0, help="0 skips the tuning phase")
    parser.add_argument("--json", help="also write the raw numbers here")
    args = parser.parse_args()
    out = asyncio.run(run(args))
    print(report(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
