"""`helion-pallas tune`: the command line of the tuner (compiler/cli.py takes its arguments from
arguments.py and calls run).

Tunes every kernel of a file (or -k one) for every shape set (or --shape-set / --args one), prints a live
progress bar on stderr when it is a terminal (not with --json or --progress jsonl), then per shape set a
table of the best configs and the decorator line to paste. --json prints one object per shape set (a list
when there are several); --progress jsonl writes one JSON event per line on stderr. Model figures are
estimates for the named chip and are labelled so. Exit status: 0 ok, 1 nothing valid found, the
kernel has errors, or the results could not be stored (an unusable --store: said before and after the
results, which are still printed; --json adds "store_error"), 2 usage (bad file, kernel, shape set,
executor). --write-configs writes each best where vLLM reads it (write_configs.py); a file it cannot
write makes the status 1. The correctness gate runs the kernel's code (see compiler/reference/isolated.py): running
this command is the request to do so.

Where the time goes: the model search runs in this process, and so does the gate's compile of each winner
for reduced shapes; the executor runs the gate's check (and the compile / tpu evaluators). With the model
evaluator the default `local` executor is one worker, started first — this process parses the file with
no torch imported, starts the worker, and only then imports torch and the tuner, so the two import at
once — and warmed up (the eager-reference process forked from it, jax and Pallas imported) while the
search runs; each shape set's winner goes to it as soon as its search ends, while the next shape set is
searched. A winner's verdict the analysis cache remembers (verdicts.py) is not checked again; when every
shape set's is likely remembered, the worker starts only if a check turns out to be needed. Run from the
command line, the process exits as soon as the results are printed (no interpreter teardown).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .. import skip_dynamo_import
from ..api import Kernel, load
from ..ir.chips import canonical_name
from ..support.diagnostics import CompileError, Diagnostic
from .executors import Executor, ExecutorError, LocalExecutor, make_executor
from .objective import VMEM_MARGIN, over_default
from .problem import Problem
from .store import StoreError, TuningStore
from .verdicts import Verdicts
from .warm_gate import warm_up

if TYPE_CHECKING:
    from .driver import TuneOptions, TuneProgress, TuneResult, TuneRun

OK, NOTHING_VALID, USAGE = 0, 1, 2


class UsageError(Exception):
    pass


def run(ns: argparse.Namespace) -> int:
    """Run `tune` for parsed arguments; returns the exit status (or, with ns.exit_when_done, ends the
    process with it as soon as the output is out)."""
    try:
        status = _run(ns)
    except UsageError as exc:
        print(f"helion-pallas tune: error: {exc}", file=sys.stderr)
        status = USAGE
    if getattr(ns, "exit_when_done", False):
        exit_now(status)
    return status


def _run(ns: argparse.Namespace) -> int:
    if ns.max_evals is not None and ns.max_evals < 1:
        raise UsageError("--max-evals must be at least 1")
    if ns.jobs is not None and ns.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if ns.budget is not None and ns.budget <= 0:
        raise UsageError("--budget must be positive")
    try:
        chip = canonical_name(ns.chip)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    executor = refine = store = None
    finished = False
    store_error: str | None = None
    restore: Callable[[], None] = lambda: None  # noqa: E731
    try:
        if ns.evaluator == "auto":
            refine = _auto_evaluator(ns, chip)
        try:
            # the gate's worker: forked when this process already has torch (a fork of standby.py), which
            # only ever traces with meta tensors (no torch computation whose threads a fork would lose)
            executor = make_executor(_gate_executor_spec(ns), {"CPU": 1.0}, fork=True)
        except ExecutorError as exc:
            raise UsageError(str(exc)) from None
        problems, failed = _problems(ns, chip)
        if not problems:
            return NOTHING_VALID
        verdicts = Verdicts()
        if isinstance(executor, LocalExecutor) and not _verdicts_known(problems, ns.evaluator, verdicts):
            executor.submit(warm_up)  # its imports run beside this process's own, then beside the search
        import_the_tuner()
        from .driver import TuneOptions
        from .evaluators import get_evaluator

        unavailable = get_evaluator(ns.evaluator).available()
        if unavailable:
            print(f"helion-pallas tune: the {ns.evaluator} evaluator cannot run: {unavailable}", file=sys.stderr)
            return NOTHING_VALID
        store, store_error = _open_store(ns.store)
        stop = threading.Event()
        restore = _on_signals(stop)
        if ns.evaluator == "tpu" and refine is None:
            refine, why = _tpu_worker(ns, chip)
            if why is not None:
                print(f"helion-pallas tune: the tpu evaluator cannot run: {why}", file=sys.stderr)
                return NOTHING_VALID
        options = TuneOptions(ns.evaluator, ns.max_evals, ns.budget, ns.seed, max(1, ns.top))
        results = _tune_all(ns, problems, options, executor, refine, store, stop, verdicts)
        finished = not stop.is_set()
    finally:
        for ex in (executor, refine):
            if ex is not None:  # a finished run's workers end on their own (executors.LocalExecutor.shutdown)
                ex.shutdown(cancel=not finished)
        if store is not None:
            store.close()
        restore()
    if ns.json:
        extra = {"store_error": store_error} if store_error else {}
        payload: Any = [r.to_json() | extra for r in results]
        print(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2))
    if ns.write_configs is not None and not _write_configs(ns, results):
        return NOTHING_VALID
    if store_error is not None:
        print(f"helion-pallas tune: error: these results were not stored: {store_error}", file=sys.stderr)
        return NOTHING_VALID
    found = all(r.best is not None for r in results)
    return OK if results and found and not failed else NOTHING_VALID


def _write_configs(ns: argparse.Namespace, results: list[TuneResult]) -> bool:
    """--write-configs: the bests into vLLM's platform files; False (said on stderr) when one cannot be written."""
    from ..ir.vllm_configs import VllmConfigError
    from .write_configs import NoConfigsFolder, write_results

    try:
        for line in write_results(results, ns.file, ns.write_configs or None):
            print(f"helion-pallas tune: {line}", file=sys.stderr)
    except (NoConfigsFolder, OSError, VllmConfigError) as exc:
        print(f"helion-pallas tune: error: cannot write the vLLM config: {exc}", file=sys.stderr)
        return False
    return True


def import_the_tuner() -> None:
    """torch, the front end, the search, the gate's compile: imported only once the gate worker is starting
    (everything before is torch-free), with the garbage collector off and what they made frozen after."""
    import gc

    gc.disable()
    try:
        from . import driver, evaluators, parallel  # noqa: F401

        skip_dynamo_import()  # this process compiles and never runs torch.compile: ~1 s off the first trace
    finally:
        gc.freeze()
        gc.enable()


def _auto_evaluator(ns: argparse.Namespace, chip: str) -> Executor | None:
    """--evaluator auto: tpu when this machine has a TPU of `chip` that this command may use (asked in the worker
    that would measure), else model, saying why on stderr. Returns the tpu evaluator's executor when it is tpu.
    A machine without TPU device nodes is model at once (no worker, no jax), unless the executor is Ray: its
    TPU VMs are asked."""
    from ..tpu.runtime import tpu_device_files

    ns.evaluator = "model"
    if not tpu_device_files() and not ns.executor.startswith("ray"):
        return None
    refine, why = _tpu_worker(ns, chip)
    if why is not None:
        print(f"helion-pallas tune: model estimates, not the chip: {why}", file=sys.stderr)
        return None
    ns.evaluator = "tpu"
    return refine


def _tpu_worker(ns: argparse.Namespace, chip: str) -> tuple[Executor | None, str | None]:
    """The workers the tpu evaluator measures in, one per chip (chip_workers.py), once they have their chips
    (asked there: a chip is open in one process at a time); else None and why not."""
    from .chip_workers import measuring_executor, probe

    try:
        refine = measuring_executor(ns.executor)
    except ExecutorError as exc:
        return None, str(exc)
    why = probe(refine, chip)
    if why is not None:
        refine.shutdown(cancel=True)
        return None, why
    return refine, None


def _gate_executor_spec(ns: argparse.Namespace) -> str:
    """The model needs no workers, only the gate does, and one is enough: `local` means `local:1` then."""
    return "local:1" if ns.evaluator == "model" and ns.executor == "local" else ns.executor


def exit_now(status: int) -> None:
    """End the process with `status` once its output is out: skip the interpreter's teardown (jax, torch,
    thread joins take a second or two after the results are printed). Not when Ray is connected: its
    shutdown hook stops the local cluster's processes."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        sys.exit(status)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    tracker = sys.modules.get("multiprocessing.resource_tracker")
    if tracker is not None:  # the process pool started it: stop and reap it rather than leave it behind
        with contextlib.suppress(Exception):
            # Children (the gate's reference worker) hold the tracker's pipe open: it would never see the
            # end of it, and stopping it would wait forever.
            for child in sys.modules["multiprocessing"].active_children():
                child.kill()
                child.join(5)
            tracker._resource_tracker._stop()
    os._exit(status)


def _tune_all(
    ns: argparse.Namespace,
    problems: list[Problem],
    options: TuneOptions,
    executor: Executor,
    refine: Executor | None,
    store: TuningStore | None,
    stop: threading.Event,
    verdicts: Verdicts,
) -> list[TuneResult]:
    """Search each problem in turn — with a model evaluator and several CPUs, several at once in forked
    copies of this process (parallel.py) — sending each winner to the gate as soon as it is known; then
    collect the verdicts and print the results in order."""
    from .driver import TuneRun, submit_check
    from .evaluators import EvaluatorUnavailable
    from .parallel import search_elsewhere

    runs: list[TuneRun] = []
    bar = _ProgressBar(sys.stderr) if sys.stderr.isatty() and not ns.json and not ns.progress else None
    workers = min(ns.jobs or os.cpu_count() or 1, len(problems)) if options.evaluator == "model" else 1
    if "jax" in sys.modules:  # jax's threads do not survive a fork (tuning called in a process that ran code)
        workers = 1
    elsewhere = {}
    early: dict[int, tuple] = {}  # problem -> (config, its check), started during a forked search

    def on_early(index: int, config: dict[str, Any], case: Any) -> None:
        early[index] = (config, submit_check(executor, case, options.seed, verdicts))

    if workers > 1:
        with contextlib.suppress(CompileError):  # imports (torch, the tracer) before forking, not in each child
            problems[0].load_kernel().config_space(problems[0].args, problems[0].chip)
        checks_early = options.verify and isinstance(executor, LocalExecutor)
        elsewhere = search_elsewhere(problems, options, store, _progress_sink(ns, None), stop, workers,
                                     on_early if checks_early else None,
                                     _cache_path(verdicts))
    for i, problem in enumerate(problems):
        if stop.is_set():
            break
        try:
            run = TuneRun(
                problem,
                options,
                executor=executor,
                refine_executor=refine,
                store=store,
                progress=_progress_sink(ns, bar),
                should_stop=stop,
                verdicts=verdicts,
                searched=elsewhere[i].take(i) if i in elsewhere else None,
                early=early.pop(i, None),  # after take(i): the child sends a problem's early case before it
            )
            run.start_gate()
        except CompileError as exc:
            for d in exc.diagnostics:
                _print_diagnostic(ns, d)
            continue
        except EvaluatorUnavailable as exc:
            print(f"helion-pallas tune: the {options.evaluator} evaluator cannot run: {exc}", file=sys.stderr)
            break
        finally:
            if bar is not None:
                bar.finish()
        runs.append(run)
    results = []
    for run in runs:
        result = run.finish()
        results.append(result)
        if not ns.json:
            print(format_result(result))
            sys.stdout.flush()
    return results


def _cache_path(verdicts: Verdicts | None) -> str | None:
    """The analysis cache's file, for forked searches to open their own; None when there is none ("off")."""
    path = verdicts.cache.path if verdicts is not None else None
    return str(path) if path is not None else None


def _verdicts_known(problems: list[Problem], evaluator: str, verdicts: Verdicts) -> bool:
    """Every problem was tuned before with a checked winner: its gate's verdict is likely remembered, so
    no gate worker is started before one turns out to be needed."""
    return all(verdicts.has_winner(p.load_kernel().source_hash, p.shape_key, p.chip, evaluator) for p in problems)


def _problems(ns: argparse.Namespace, chip: str) -> tuple[list[Problem], bool]:
    """The (kernel, shape set) pairs to tune; prints file-level errors. Second value: some were skipped."""
    try:
        with open(ns.file, encoding="utf-8") as f:
            source = f.read()
    except OSError as exc:
        raise UsageError(f"cannot read {ns.file}: {exc.strerror or exc}") from None
    module = load(Path(ns.file)) if ns.file.endswith(".ipynb") else load(source, where=os.path.abspath(ns.file))
    module.cases = getattr(ns, "cases", None)
    source = module.source  # a notebook's: its code cells as one module
    ns.where = lambda pos: module.describe(pos, ns.file)
    errors = [d for d in module.diagnostics if d.is_error]
    if ns.kernel is not None and ns.kernel not in module.kernels:
        known = ", ".join(module.kernels) or "none"
        raise UsageError(f"{ns.file} has no kernel {ns.kernel!r} (kernels: {known})")
    kernels = [module.kernels[ns.kernel]] if ns.kernel else list(module.kernels.values())
    if not kernels:
        for d in errors:
            _print_diagnostic(ns, d)
        print(f"helion-pallas tune: {ns.file} has no @helion.kernel function", file=sys.stderr)
        return [], True
    problems: list[Problem] = []
    skipped = False
    for d in module.notebook.diagnostics if module.notebook is not None else ():  # cells that do not parse
        _print_diagnostic(ns, d)
    for kernel in kernels:
        for d in kernel.definition.diagnostics:
            if d.is_error:
                _print_diagnostic(ns, d)
        try:
            problems += _kernel_problems(ns, kernel, source, chip)
        except CompileError as exc:
            for d in exc.diagnostics:
                _print_diagnostic(ns, d)
            skipped = True
    return problems, skipped


def _kernel_problems(ns: argparse.Namespace, kernel: Kernel, source: str, chip: str) -> list[Problem]:
    if ns.args is not None:
        return [Problem(source, kernel.name, kernel.resolve_args(ns.args), chip, ns.file, None)]
    if ns.shape_set is not None:
        if not 0 <= ns.shape_set < len(kernel.shape_sets):
            raise UsageError(
                f"`{kernel.name}` has {len(kernel.shape_sets)} shape set(s); --shape-set "
                f"{ns.shape_set} is out of range"
            )
        indices = [ns.shape_set]
    else:
        indices = list(range(len(kernel.shape_sets)))
        if not indices:
            kernel.resolve_args(None)  # raises the "add an args line" diagnostic
    return [Problem(source, kernel.name, kernel.shape_sets[i], chip, ns.file, i) for i in indices]


def _open_store(path: str | None) -> tuple[TuningStore | None, str | None]:
    """The store, or None and why not (said now, and again after the results: they are not lost silently)."""
    try:
        return TuningStore(path), None
    except StoreError as exc:
        print(f"helion-pallas tune: error: {exc}; tuning anyway, results will not be stored", file=sys.stderr)
        return None, str(exc)


def _on_signals(stop: threading.Event) -> Callable[[], None]:
    """SIGINT / SIGTERM end the search early (results so far are reported); returns the restorer."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    for s in previous:
        signal.signal(s, handler)

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return restore


def _progress_sink(ns: argparse.Namespace, bar: _ProgressBar | None) -> Callable[[TuneProgress], None] | None:
    if ns.progress == "jsonl":

        def emit(event: TuneProgress) -> None:
            write_json_line(event.to_json())

        return emit
    return bar.update if bar is not None else None


def write_json_line(event: dict[str, Any]) -> None:
    """One progress event on stderr in a single write: forked search processes share that stream, and a line
    written as text and newline separately can be split by another process's line."""
    sys.stderr.write(json.dumps(event) + "\n")
    sys.stderr.flush()


class _ProgressBar:
    """One self-rewriting stderr line: phase, a bar when the total is known, counts, best so far."""

    def __init__(self, stream: TextIO, width: int = 24):
        self.stream = stream
        self.width = width
        self.shown = False
        self.start = time.monotonic()

    def update(self, p: TuneProgress) -> None:
        if p.phase == "done":
            return
        bar = ""
        if p.total:
            filled = min(self.width, int(self.width * p.evaluated / p.total))
            bar = "[" + "#" * filled + "." * (self.width - filled) + f"] {p.evaluated}/{p.total}"
        else:
            bar = f"{p.evaluated} evaluated"
        best = f"best {_ms(p.best_seconds)}" if p.best_seconds is not None else "no valid config yet"
        where = p.kernel + ("" if p.shape_set_index is None else f" #{p.shape_set_index}")
        line = f"{where}: {p.phase} {bar}, {p.pruned} pruned, {best} ({time.monotonic() - self.start:.0f} s)"
        self.stream.write("\r\x1b[2K" + line[:200])
        self.stream.flush()
        self.shown = True

    def finish(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self.shown = False
        self.start = time.monotonic()


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.1f} µs"


def format_result(r: TuneResult) -> str:
    """The human-readable report of one shape set: header, top configs, pruning, decorator line."""
    p = r.problem
    where = f"shape set {p.shape_set}" if p.shape_set is not None else "--args"
    kind = {"model": "model estimates", "schedule": "TPU compiler estimates"}.get(r.evaluator, f"{r.evaluator} evaluator")
    plain = r.evaluator in ("model", "schedule")
    label = f"{kind} for {p.chip}" + (" (estimates)" if r.estimate and not plain else "")
    lines = [f"{p.kernel} [{where}: {p.shape_key}] on {p.chip} — {label}"]
    lines.append(
        f"  {r.evaluated} configs evaluated, {r.pruned} pruned ({r.strategy} search, "
        f"stopped: {r.stop_reason}, {r.elapsed:.1f} s)"
    )
    for reason, n in sorted(r.pruned_reasons.items(), key=lambda kv: -kv[1]):
        lines.append(f"    pruned {n}: {reason}")
    for rej in r.rejected:
        lines.append(f"  rejected by {rej['evaluator']}: {_config_text(rej['config'])}: {rej['why']}")
    if not r.top:
        lines.append("  no valid config found")
        return "\n".join(lines)
    head = f"  {'#':>2} {'time':>12} {'TF/s':>8} {'GB/s':>8} {'roofline':>8}  config"
    lines += [head]
    for i, c in enumerate(r.top, 1):
        mark = "*" if r.best is not None and c.config == r.best.config else " "
        over = "^" if over_default(c.metrics) else " "
        lines.append(
            f" {mark}{i:>2} {_ms(c.seconds):>11}{over} {_rate(c.metrics, 'tflops'):>8} "
            f"{_rate(c.metrics, 'gbps'):>8} {100 * c.metrics.get('roofline_fraction', 0):7.1f}%  "
            f"{_config_text(c.config)}"
        )
    if any(over_default(c.metrics) for c in r.top):
        ranked = f"ranked as if {VMEM_MARGIN:.0%} slower" if r.estimate else "measured, ranked by its time"
        lines.append(f"  ^ needs more than the default scoped VMEM: {ranked}")
    if r.best is None:
        lines.append("  no candidate passed the correctness check")
    else:
        check = r.best.correctness
        if check is not None:
            lines.append(f"  * correctness: {check.verdict} — {check.message} (on {check.shapes})")
        est = "estimated " if r.estimate else ""
        m = r.best.metrics
        rates = "".join(
            f"{_rate(m, k)} {unit}, " for k, unit in (("tflops", "TF/s"), ("gbps", "GB/s")) if m.get(k)
        )
        lines.append(
            f"  best: {_ms(r.best.seconds)} {est}on {p.chip}, {rates}"
            f"{100 * m.get('roofline_fraction', 0):.1f}% of the roofline bound"
        )
        lines.append(f"  {r.decorator}")
    for note in r.notes:
        lines.append(f"  note: {note}")
    if r.evaluator == "schedule":
        lines.append(f"  (figures are TPU compiler estimates for {p.chip} from libtpu's schedule, not measurements)")
    elif r.estimate:
        lines.append(f"  (figures are model estimates for {p.chip}, not measurements)")
    return "\n".join(lines)


def _rate(metrics: dict[str, Any], key: str) -> str:
    value = metrics.get(key)
    return f"{value:.1f}" if value else "-"


def _config_text(config: dict[str, Any]) -> str:
    from ..ir.config import Config

    return repr(Config(config))


def _print_diagnostic(ns: argparse.Namespace, d: Diagnostic) -> None:
    """`file.py:12:5: error ...`, or `nb.ipynb:cell 3:12:5: ...` (ns.where, set when the file was read)."""
    print(f"{ns.where(d.range.start)}: {d.severity.name.lower()} {d.code}: {d.message}", file=sys.stderr)
