"""The language server on a TPU VM, driven as an editor drives it with default settings (issue 42's closing
checks): the machine's chip detected and used as `helion.chip: auto`; *Tune* measuring on it; *Tune file* with
two kernels measuring both on the chip one after the other, the second waiting in line; *Check on TPU* putting
the chip's verdict on the kernel line (sent while the tunings hold the chip: it waits its turn), for each kernel;
the hover's time line, and the current config of examples/attention.py measured on the chip on request
(helion.measureOnChip, the hover's "Measure on TPU v5 lite" link) and shown in its hover with its runs and
spread. The lens titles of the two kernels are sampled every second while they tune (the queue as shown). On a
machine without a TPU the same session runs, says "no TPU here", and records why each figure is an estimate.

It starts `python -m helion_ls` over stdio on a temporary trusted workspace holding examples/attention.py and
`two_kernels.py` (attention at 8k and softmax at 4096 rows, no shape set that does not fit the chip's HBM).
Writes $OUT/chip_ls_on_tpu.json (every tuningState, diagnostics, lens titles, messages, timings and one
verdict per check) and $OUT/chip_ls_on_tpu.txt (the summary it prints); exits 1 when a check that the machine
should pass failed.

    OUT=/tmp/out python bench/chip_ls_on_tpu.py [--timeout 450]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def two_kernels() -> str:
    """attention (8k shape set only) and softmax (4096 rows only) in one file, each with its own reference."""
    attention = (REPO / "examples" / "attention.py").read_text()
    attention = "\n".join(line for line in attention.splitlines() if "32768" not in line)
    attention = attention.replace("def reference(", "def reference_attention(").split("\nSMALL =")[0]
    softmax = (REPO / "examples" / "softmax.py").read_text()
    body = softmax.split("import torch", 1)[1].replace("def reference(", "def reference_softmax(")
    body = "\n".join(line for line in body.splitlines() if "65536" not in line).split("\nSMALL =")[0]
    return attention.rstrip() + "\n\n" + body.strip() + "\n"


class Session:
    def __init__(self) -> None:
        self.client = LanguageClient("chip-ls-on-tpu", "1")
        self.t0 = time.monotonic()
        self.states: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.diagnostics: dict[str, list[Any]] = {}
        self.machine: Any = None
        c = self.client

        @c.feature("helion/tuningState")
        def on_state(params: Any) -> None:
            self.states.append({"t": self.now(), **_plain(params)})

        @c.feature("helion/machine")
        def on_machine(params: Any) -> None:
            self.machine = _plain(params)

        @c.feature(types.WORKSPACE_CODE_LENS_REFRESH)
        def on_refresh(_params: Any) -> None:
            return None

        @c.feature(types.WORKSPACE_CONFIGURATION)
        def on_configuration(params: Any) -> list[Any]:
            return [None for _ in params.items]  # the defaults: what an editor with no helion settings sends

        @c.feature(types.WINDOW_SHOW_MESSAGE)
        def on_message(params: types.ShowMessageParams) -> None:
            self.messages.append({"t": self.now(), "kind": "show", "message": params.message})

        @c.feature(types.WINDOW_LOG_MESSAGE)
        def on_log(params: types.LogMessageParams) -> None:
            self.messages.append({"t": self.now(), "kind": "log", "message": params.message})

        @c.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
            self.diagnostics[params.uri] = list(params.diagnostics)

        c.feature("helion/diagnosticsStage")(lambda _params: None)

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 2)

    async def lenses(self, uri: str) -> list[dict[str, Any]]:
        found = await self.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        return [{"line": lens.range.start.line, "title": lens.command.title, "tooltip": lens.command.tooltip}
                for lens in found or [] if lens.command is not None]

    async def wait(self, what: str, predicate: Any, deadline: float, every: float = 1.0) -> Any:
        while time.monotonic() < deadline:
            found = await predicate()
            if found:
                return found
            await asyncio.sleep(every)
        raise TimeoutError(f"{what}: not within the time left")

    async def command(self, name: str, arg: dict[str, Any]) -> Any:
        return await self.client.workspace_execute_command_async(types.ExecuteCommandParams(command=name,
                                                                                            arguments=[arg]))

    def open(self, path: Path) -> str:
        uri = path.as_uri()
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
            uri=uri, language_id="python", version=1, text=path.read_text())))
        return uri


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if hasattr(obj, "_asdict"):  # pygls's objects for custom messages are named tuples
        return {k: _plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return {k: _plain(v) for k, v in vars(obj).items() if not k.startswith("_")}
    return obj


async def run(timeout: float, out: Path) -> int:
    from helion_ls.workers.machine_tpu import machine_tpu

    machine = machine_tpu()
    on_tpu = machine.chip is not None
    root = Path(tempfile.mkdtemp(prefix="chip-ls-on-tpu-"))
    ws = root / "ws"
    ws.mkdir()
    (ws / "attention.py").write_text((REPO / "examples" / "attention.py").read_text())
    (ws / "two_kernels.py").write_text(two_kernels())
    s = Session()
    record: dict[str, Any] = {"date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "machine_detected_by_bench": machine.to_json(), "cpu_cores": os.cpu_count(),
                              "checks": {}}
    checks = record["checks"]
    deadline = time.monotonic() + timeout
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    env.pop("JAX_PLATFORMS", None)  # as on a TPU VM's shell: the server pins its own processes to the CPU
    await s.client.start_io(sys.executable, "-m", "helion_ls", env=env)
    try:
        await s.client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(
                workspace=types.WorkspaceClientCapabilities(
                    configuration=True, code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=True)),
                window=types.WindowClientCapabilities(work_done_progress=False)),
            root_uri=ws.as_uri(), workspace_folders=[types.WorkspaceFolder(uri=ws.as_uri(), name="ws")],
            initialization_options={"workspaceTrusted": True, "storePath": str(root / "tuning.sqlite")},
        ))  # default settings otherwise: chip auto, evaluator auto, 60 s budget, 2 tunings at once
        s.client.initialized(types.InitializedParams())
        answer = await s.client.protocol.send_request_async("helion/machine", {})
        record["machine"] = _plain(answer)
        from helion_ls.workers.machine_tpu import chip_note

        shown = record["machine"].get("chip") or "v7x"
        record["status_bar_chip"] = chip_note(shown, False)  # the words the client's status bar shows
        want_chip = machine.chip or "v7x"
        checks["chip_detected"] = record["machine"].get("chip") == machine.chip and (
            not on_tpu or machine.chip == "v5e")

        # 1. attention.py: the lenses name the machine's chip, and Check on TPU is offered there
        attention = s.open(ws / "attention.py")
        titles = await s.wait("attention's Tune lens", lambda: _titles_with(s, attention, "Tune on"), deadline)
        record["attention_lenses_after_open"] = titles
        checks["lens_names_the_chip"] = any(t["title"] == f"Tune on {want_chip}" for t in titles)
        checks["check_lens_offered"] = (not on_tpu) or any(t["title"].startswith("Check on TPU") for t in titles)

        # 2. Tune file with two kernels, then Check on TPU of attention.py while they hold the chip
        both = s.open(ws / "two_kernels.py")
        await s.wait("two_kernels' Tune lenses", lambda: _titles_with(s, both, "Tune on"), deadline)
        started = s.now()
        jobs = await s.command("helion.tuneFile", {"uri": both})
        record["tune_file_answer"] = _plain(jobs)
        check = await s.command("helion.checkOnChip", {"uri": attention, "kernel": "attention"})
        record["check_answer"] = _plain(check)
        record["check_answer_softmax"] = _plain(await s.command("helion.checkOnChip", {"uri": both, "kernel": "softmax"}))
        record["lenses_while_queued"] = await s.lenses(both)
        seen: list[dict[str, Any]] = []  # each lens title of two_kernels.py as it changed while they tuned

        async def tunings_done() -> bool:
            for lens in await s.lenses(both):
                if lens["title"].startswith(("Tuning", "Verifying", "Waiting")) and not any(
                        x["line"] == lens["line"] and x["title"] == lens["title"] for x in seen[-6:]):
                    seen.append({"t": s.now(), "line": lens["line"], "title": lens["title"]})
            final = {(st["kernel"], st["shapeSet"]) for st in s.states
                     if st["uri"] == both and st["state"] in ("done", "failed", "cancelled", "stale")}
            return len(final) >= 2

        await s.wait("both tunings", tunings_done, deadline, every=1.0)
        record["lens_titles_while_tuning"] = seen
        record["tune_file_seconds"] = round(s.now() - started, 1)
        best_lenses = await s.wait("Best lenses", lambda: _titles_with(s, both, "Best:", 2), deadline)
        record["two_kernels_lenses_after_tuning"] = best_lenses
        ours = [st for st in s.states if st["uri"] == both]
        done = {st["kernel"]: st for st in ours if st["state"] == "done"}
        evaluators = {k: (st.get("best") or {}).get("evaluator") for k, st in done.items()}
        record["tuned_evaluators"] = evaluators
        checks["tune_measures_on_chip"] = (len(done) == 2 and set(evaluators.values()) == {"tpu"}) if on_tpu else (
            len(done) == 2 and set(evaluators.values()) == {"model"})
        waiting = [st for st in ours if (st.get("title") or "").startswith("Waiting for the TPU")]
        record["waiting_titles"] = sorted({st["title"] for st in waiting})
        runs = {k: [st["t"] for st in ours if st["kernel"] == k and st["state"] == "running"] for k in done}
        ends = {k: st["t"] for k, st in done.items()}
        record["running_at"], record["done_at"] = runs, ends
        if on_tpu and len(done) == 2:
            first, second = sorted(done, key=lambda k: min(runs[k] or [1e9]))
            checks["queued_one_after_the_other"] = bool(waiting) and min(runs[second]) >= ends[first]
        checks["best_lens_says_what_it_is"] = all(
            ("[measured on TPU v5 lite" if on_tpu else f"[model estimate for {want_chip}") in t["title"]
            for t in best_lenses if t["title"].startswith("Best:"))

        # 3. the check's verdict on attention's decorator line
        async def verdict() -> list[Any]:
            return [d for d in s.diagnostics.get(attention, []) if d.source == "helion check"]

        found = await s.wait("the check's verdict", verdict, deadline, every=2.0)
        record["check_diagnostics"] = [{"line": d.range.start.line, "severity": int(d.severity or 0),
                                        "message": d.message} for d in found]

        async def softmax_verdict() -> list[Any]:
            return [d for d in s.diagnostics.get(both, []) if d.source == "helion check"]

        found_softmax = await s.wait("softmax's check verdict", softmax_verdict, deadline, every=2.0)
        record["check_diagnostics_softmax"] = [{"line": d.range.start.line, "severity": int(d.severity or 0),
                                                "message": d.message} for d in found_softmax]
        verdicts = [d for d in [*found, *found_softmax] if d.message.startswith("Check passed") or d.severity == 1]
        checks["check_verdict_on_kernel_line"] = bool(found) and bool(found_softmax) and len(verdicts) >= 2 and all(
            ("on the chip: TPU v5 lite" in d.message) == on_tpu for d in verdicts)

        # 4. the hover on each tuned kernel: the model's time and, where measured, the chip's
        text = (ws / "two_kernels.py").read_text().splitlines()
        hovers = {}
        for kernel in ("attention", "softmax"):
            line = next(i for i, x in enumerate(text) if x.startswith(f"def {kernel}("))
            hover = await s.client.text_document_hover_async(types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=both), position=types.Position(line=line, character=5)))
            value = hover.contents.value if hover is not None and hasattr(hover.contents, "value") else ""
            hovers[kernel] = [x for x in value.splitlines() if x.startswith("Time on")]
        record["hover_time_lines"] = hovers
        checks["hover_shows_measured_time"] = any("measured on" in x for v in hovers.values() for x in v) or not on_tpu

        # 5. the current config of attention.py (not tuned here) measured on the chip, on request, in its hover
        before = await _time_lines(s, attention, ws / "attention.py", "attention")
        record["attention_hover_before_measuring"] = before
        asked = await s.command("helion.measureOnChip", {"uri": attention, "kernel": "attention", "shapeSet": 0})
        record["measure_answer"] = _plain(asked)
        if on_tpu:
            said = await s.wait("the measurement", lambda: _message_with(s, ("Measured attention",
                                                                             "attention (shape set 0) was not")),
                                deadline, every=2.0)
            record["measure_message"] = said
        after = await _time_lines(s, attention, ws / "attention.py", "attention")
        record["attention_hover_after_measuring"] = after
        first = after[0] if after else ""
        checks["hover_shows_current_config_time"] = (
            f"measured on {machine.device_kind} **" in first and "best of" in first and "slowest loop" in first
        ) if on_tpu else ("(an estimate: there is no TPU here" in first and "refused" in (record["measure_answer"] or {}))
    except Exception as exc:  # recorded: the lead reads what happened up to here
        record["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        record["tuning_states"] = s.states
        record["messages"] = s.messages
        record["seconds"] = s.now()
        try:
            await asyncio.wait_for(s.client.shutdown_async(None), 30)
            s.client.exit(None)
        except Exception as exc:
            record["shutdown_error"] = repr(exc)
        await s.client.stop()
    out.mkdir(parents=True, exist_ok=True)
    (out / "chip_ls_on_tpu.json").write_text(json.dumps(record, indent=1, default=str))
    lines = [f"bench/chip_ls_on_tpu.py, {record['date_utc']}, {os.cpu_count()} cores: " + (
        f"this machine has {machine.count} x {machine.device_kind} ({machine.chip})" if on_tpu
        else f"no TPU here ({machine.why_none or 'no TPU device'}): every figure is the model's estimate"
        .replace("no TPU here (no TPU here)", "no TPU here"))]
    lines += [f"{'ok  ' if ok else 'FAIL'} {name}" for name, ok in checks.items()]
    for key in ("machine", "status_bar_chip", "tune_file_seconds", "tuned_evaluators", "waiting_titles", "lens_titles_while_tuning",
                "check_diagnostics", "check_diagnostics_softmax", "hover_time_lines",
                "attention_hover_before_measuring", "measure_answer", "attention_hover_after_measuring", "error"):
        if key in record:
            lines.append(f"{key}: {record[key]}")
    lines.append(f"wrote {out / 'chip_ls_on_tpu.json'} after {record['seconds']} s")
    (out / "chip_ls_on_tpu.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if checks and all(checks.values()) and "error" not in record else 1


async def _time_lines(s: Session, uri: str, path: Path, kernel: str) -> list[str]:
    """The kernel hover's "Time on" lines, one per shape set."""
    text = path.read_text().splitlines()
    line = next(i for i, x in enumerate(text) if x.startswith(f"def {kernel}("))
    hover = await s.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=5)))
    value = hover.contents.value if hover is not None and hasattr(hover.contents, "value") else ""
    return [x for x in value.splitlines() if x.startswith("Time on")]


async def _message_with(s: Session, starts: tuple[str, ...]) -> str | None:
    return next((m["message"] for m in s.messages if m["message"].startswith(starts)), None)


async def _titles_with(s: Session, uri: str, prefix: str, count: int = 1) -> list[dict[str, Any]] | None:
    titles = await s.lenses(uri)
    return titles if sum(t["title"].startswith(prefix) for t in titles) >= count else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=450.0, help="seconds for the whole session")
    args = parser.parse_args()
    out = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="chip-ls-out-"))
    return asyncio.run(run(args.timeout, out))


if __name__ == "__main__":
    sys.exit(main())
