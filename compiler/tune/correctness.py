"""The correctness gate: a config is reported as best only after its generated code agreed with the eager
reference on reduced shapes.

It comes in two halves so that the process that searched does the compiling and a worker only runs code:
`prepare_check` shrinks the shapes and compiles the config for them (static work, in the tuning process,
whose compiler is warm) into a `GateCase` of plain data; `check_case` runs it (in a worker, which then never
traces a kernel and so never pays for torch's tracing machinery).

The TPU compiler's verdict at the REAL shapes (libtpu's deviceless compile, where libtpu is installed) is part
of the check: `prepare_check` only records what that compile needs (`RealCompile`, the config's module at the
real shapes) and libtpu is asked while the reduced check runs (ask_tpu_compiler: by the tuning process's own
threads, each waiting on its libtpu worker process, so two shape sets' verdicts compile side by side), so the
search never waits on a compile that takes seconds (attention 8k unrolled: ~7 s); the verdict is remembered with
the rest of the check (verdicts.py).

The generated module runs (TPU interpret mode on a CPU machine) on random inputs of the reduced shapes
(shrink.py) and its results — returned tensors and tensors it wrote in place — are compared with the eager
reference run of the ORIGINAL kernel source (compiler.reference) on the same inputs and block sizes. A
mismatch is a wrong result; code that raises is a failure; a reference that cannot run the kernel leaves
the config unverified (that is no fault of the config). The reference runs user code, so it runs in its
own resource-limited process (compiler.reference.isolated); still, never call this in the language server.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import torch

from ..api import Kernel
from ..compiled import CompiledKernel
from ..ir.chips import Chip, get_chip
from ..ir.specs import ArgSpec, TensorSpec, format_args
from ..ir.tables import IndexTable
from ..reference import ReferenceProcess, ReferenceRunError
from ..reference.inputs import Drawn
from ..support.diagnostics import CompileError
from .shrink import reduced_args

# Largest error allowed, relative to the largest magnitude of the reference output, by output dtype. Both
# sides compute in the same dtypes with the same block sizes; what differs is accumulation order and the
# rounding of intermediates (bf16 keeps 8 bits of mantissa: ~0.4% per rounding, compounded over a few ops).
TOLERANCE = {torch.float32: 1e-3, torch.float64: 1e-6, torch.bfloat16: 3e-2, torch.float16: 1e-2,
             # fp8 keeps 3 (e4m3) or 2 (e5m2) bits: one rounding apart is 2**-3 or 2**-2 of a value
             torch.float8_e4m3fn: 0.13, torch.float8_e5m2: 0.26}
DEFAULT_TOLERANCE = 3e-2

Verdict = Literal["ok", "wrong", "failed", "unverified"]


@dataclass(frozen=True)
class CorrectnessResult:
    verdict: Verdict
    message: str
    shapes: str  # the reduced shapes the check ran on
    max_error: float | None = None  # worst error relative to the reference's largest magnitude
    seconds: float = 0.0
    # the TPU compiler ran out of VMEM at the real shapes: what it needed, and the VMEM report's total there
    vmem_needed_bytes: int | None = None
    vmem_estimated_bytes: int | None = None
    # what the TPU compiler said at the real shapes: "accepts", "rejects", "unknown" (it timed out or crashed);
    # None: not asked (no libtpu here)
    tpu_compiler: str | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def to_json(self) -> dict[str, Any]:
        out = {
            "verdict": self.verdict,
            "message": self.message,
            "shapes": self.shapes,
            "max_error": self.max_error,
            "seconds": self.seconds,
        }
        if self.vmem_needed_bytes is not None:
            out |= {"vmem_needed_bytes": self.vmem_needed_bytes, "vmem_estimated_bytes": self.vmem_estimated_bytes}
        if self.tpu_compiler is not None:
            out["tpu_compiler"] = self.tpu_compiler
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any], note: str = "") -> CorrectnessResult:
        """The result `to_json` wrote (KeyError / TypeError when it is not one)."""
        return CorrectnessResult(data["verdict"], data["message"] + note, data["shapes"], data.get("max_error"), 0.0,
                                 data.get("vmem_needed_bytes"), data.get("vmem_estimated_bytes"),
                                 data.get("tpu_compiler"))


_reference: ReferenceProcess | None = None


def reference_process() -> ReferenceProcess:
    """This process's eager-reference worker (separate, resource-limited, started on first use). One torch
    thread: it runs beside the generated code (XLA's own threads) — on two cores, two threads each made a
    cold tuning's checks ~0.4 s slower (three interleaved pairs of `helion-pallas tune`)."""
    global _reference
    if _reference is None:
        _reference = ReferenceProcess(threads=1)
        atexit.register(_reference.close)
    return _reference


@dataclass(frozen=True)
class RealCompile:
    """The checked config's module at the REAL shapes: what the TPU compiler's verdict needs. Plain data."""

    source: str
    entry: str
    args: tuple[dict[str, Any], ...]  # encoded as the libtpu worker reads them (libtpu_compile.encode_arg)
    shapes: str
    vmem_total_bytes: int  # the VMEM report's total there, against which libtpu's need is set

    @staticmethod
    def of(ck: CompiledKernel) -> RealCompile:
        from ..tpu.libtpu_compile import encode_arg

        tensors = [{"shape": list(s.shape), "dtype": "int32" if s.dtype_name == "int64" else s.dtype_name}
                   for s in ck.call_specs.values() if isinstance(s, TensorSpec)]  # int64 passes as int32
        scalars = [encode_arg(v) for v in ck.scalar_args().values()]
        return RealCompile(ck.source, ck.entry, tuple(tensors + scalars), format_args(ck.args), ck.vmem.total_bytes)


@dataclass(frozen=True)
class GateCase:
    """One config compiled for the gate's reduced shapes: what running it and the reference needs. Picklable."""

    module: str  # the generated Pallas module
    entry: str
    params: tuple[str, ...]
    args: dict[str, ArgSpec]  # the reduced shapes
    chip: str
    mutated: tuple[str, ...]
    kernel_source: str  # the original source, for the eager reference
    kernel_name: str
    kernel_path: str | None
    block_sizes: tuple[int, ...]  # as compiled: the reference tiles with the same blocks
    config: dict[str, Any] = field(default_factory=dict)  # the config checked, as the tuner knows it
    prepare_seconds: float = 0.0
    # every parameter of the kernel in order, as the eager reference is called: function arguments (flex
    # attention's score_mod) are compiled into the module, so `args` leaves them out; empty: same as `args`
    reference_args: dict[str, ArgSpec] = field(default_factory=dict)
    tables: tuple[IndexTable, ...] = ()  # CompiledKernel.tables: drawn as the offsets, positions, counts they are
    real: RealCompile | None = None  # asked of the TPU compiler while the check runs; None: not asked

    @staticmethod
    def of(ck: CompiledKernel, config: Mapping[str, Any] | None = None, prepare_seconds: float = 0.0,
           real: RealCompile | None = None) -> GateCase:
        k = ck.kernel
        blocks = tuple(ck.config.get("block_sizes", []))
        # the generated function's own parameters: defaulted ones included, a lambda default left out
        full = k.with_defaults(dict(ck.args))
        reference_args = {p.arg: full[p.arg] for p in k.definition.node.args.args if p.arg in full}
        return GateCase(ck.source, ck.entry, tuple(ck.call_specs), dict(ck.call_specs), ck.chip.name, tuple(ck.mutated),
                        k.source, k.name, k.path, blocks, dict(config if config is not None else ck.config),
                        prepare_seconds, reference_args, ck.tables, real)  # fmt: skip


def prepare_check(
    kernel: Kernel, args: Mapping[str, ArgSpec], config: Mapping[str, Any], chip: Chip
) -> GateCase | CorrectnessResult:
    """Shrink the shapes and compile `config` for them; a config that does not compile is failed here. Where
    libtpu is installed, the case carries the config's module at the real shapes, for the worker to ask the
    TPU compiler (tpu_verdict) — asked there, not here, so that no search waits on it."""
    start = time.perf_counter()
    try:
        small = reduced_args(kernel, args, config, chip)
        ck = kernel.compile(args=small, config=dict(config), chip=chip)
    except CompileError as exc:
        message = "; ".join(d.message for d in exc.diagnostics) or "compile error"
        return CorrectnessResult(
            "failed", f"does not compile: {message}", format_args(args), seconds=time.perf_counter() - start
        )
    return GateCase.of(ck, config, time.perf_counter() - start, real_compile(kernel, args, config, chip))


def real_compile(
    kernel: Kernel, args: Mapping[str, ArgSpec], config: Mapping[str, Any], chip: Chip
) -> RealCompile | None:
    """`config` compiled at the real shapes for the TPU compiler's verdict, or None where it cannot be asked
    (no libtpu) or the config does not compile there (the reduced compile says what is wrong)."""
    from ..tpu.libtpu_compile import libtpu_available

    if not libtpu_available():
        return None
    try:
        return RealCompile.of(kernel.compile(args=dict(args), config=dict(config), chip=chip))
    except CompileError:
        return None


def tpu_verdict(real: RealCompile, chip: Chip, compiler: Any = None) -> CorrectnessResult:
    """The TPU compiler's verdict (libtpu's deviceless compile for `chip`) on the config at the real shapes:
    `tpu_compiler` "accepts", "rejects" (verdict failed, and out of VMEM, what it needed against the report's
    total) or "unknown" (the compile timed out or crashed). The reduced run cannot show what only the real
    shapes have: attention 8k's [1, 4096, 1024] unroll, 117 MiB by the VMEM report, needs 168.66 MiB of the
    v5e's 128 to the TPU compiler and failed on the chip."""
    from ..tpu.libtpu_compile import tpu_compile
    from ..tpu.truth import compile_code

    compile_ = compiler.compile if compiler is not None else tpu_compile
    result = compile_(real.source, real.entry, list(real.args), chip, dump_mosaic=False,
                      filename=f"<helion-pallas {real.entry}>")
    if result.ok:
        return CorrectnessResult("ok", "the TPU compiler accepts it", real.shapes, seconds=result.wall_seconds,
                                 tpu_compiler="accepts")
    if result.kind in ("timeout", "crash"):
        return CorrectnessResult("unverified", f"the TPU compiler's verdict is unknown (its compile ended by "
                                 f"{result.kind} after {result.wall_seconds:.0f} s)", real.shapes,
                                 seconds=result.wall_seconds, tpu_compiler="unknown")
    needed = result.numbers.get("requested_bytes") if result.kind == "vmem_oom" else None
    what = (result.key_line or result.error or "compile failed").strip()[:300]
    message = f"the TPU compiler rejects it at {real.shapes}: {compile_code(result.kind)} {what}"
    return CorrectnessResult("failed", message, real.shapes, seconds=result.wall_seconds, vmem_needed_bytes=needed,
                             vmem_estimated_bytes=real.vmem_total_bytes if needed else None, tpu_compiler="rejects")


def check_config(
    kernel: Kernel, args: Mapping[str, ArgSpec], config: Mapping[str, Any], chip: Chip, seed: int = 0
) -> CorrectnessResult:
    """Shrink the shapes, compile `config` for them and compare with the reference (both halves here)."""
    case = prepare_check(kernel, args, config, chip)
    return case if isinstance(case, CorrectnessResult) else check_case(case, seed)


def check_compiled(ck: CompiledKernel, seed: int = 0) -> CorrectnessResult:
    """Run `ck` (its generated module, as it stands) and the eager reference on the same random inputs."""
    return check_case(GateCase.of(ck), seed)


def check_case(case: GateCase, seed: int = 0) -> CorrectnessResult:
    """Run the case's generated module and the eager reference on the same random inputs and compare; where
    the case carries its real-shape module, the TPU compiler is asked at the same time (a thread waiting on
    a libtpu worker process) and a config it rejects fails."""
    if case.real is None:
        return _compare(case, seed)
    asking = ask_tpu_compiler(case)
    return combine(_compare(case, seed), asking.result())


_asking: ThreadPoolExecutor | None = None
_compilers = threading.local()
_compiling: dict[Future[CorrectnessResult], Any] = {}  # an ask being compiled -> the TpuCompiler compiling it
_compiling_lock = threading.Lock()


def ask_tpu_compiler(case: GateCase) -> Future[CorrectnessResult]:
    """The TPU compiler's verdict on the case's real-shape module (tpu_verdict), asked now on one of two threads
    of this process, each with its own libtpu worker process: the verdicts of two shape sets' candidates are
    compiled side by side, each as soon as its case exists, never queued behind a reduced run. `drop_ask`
    stops an ask whose answer is no longer wanted."""
    global _asking
    if case.real is None:
        raise ValueError("the case carries no real-shape module")
    if _asking is None:
        _asking = ThreadPoolExecutor(max_workers=2, thread_name_prefix="helion-gate-libtpu")
    future: Future[CorrectnessResult] = Future()
    _asking.submit(_ask, future, case.real, case.chip)
    return future


def drop_ask(future: Future[CorrectnessResult]) -> None:
    """The answer of this ask is not wanted (the search's early candidate did not win): a queued ask never
    compiles, a running one is stopped (its libtpu worker killed; the thread's next ask starts a fresh one,
    ~1 CPU-second, where the rest of an unrolled attention's compile is up to ~9). Its result is then
    "unknown", never remembered."""
    if future.cancel():
        return
    with _compiling_lock:
        compiler = _compiling.get(future)
        if compiler is not None:
            compiler.interrupt()


def _ask(future: Future[CorrectnessResult], real: RealCompile, chip: str) -> None:
    from ..tpu.libtpu_compile import TpuCompiler

    if not future.set_running_or_notify_cancel():
        return  # dropped before it started
    compiler = getattr(_compilers, "compiler", None)
    if compiler is None:
        compiler = _compilers.compiler = TpuCompiler(mosaic_dump=False)  # the verdict only: no dumps to write
        atexit.register(compiler.close)
    with _compiling_lock:
        _compiling[future] = compiler
    try:
        result = tpu_verdict(real, get_chip(chip), compiler)
    except BaseException as exc:  # noqa: BLE001 - the ask's own failure, for whoever waits on it
        future.set_exception(exc)
        return
    finally:
        with _compiling_lock:  # from here on a drop cannot reach this thread's next compile
            del _compiling[future]
    future.set_result(result)


def combine(compared: CorrectnessResult, verdict: CorrectnessResult) -> CorrectnessResult:
    """One check's result from the reduced run's and the TPU compiler's: a rejection fails the config whatever
    the reduced run said; otherwise the reduced run's verdict, saying what the compiler said."""
    if verdict.tpu_compiler == "rejects":
        return replace(verdict, seconds=max(compared.seconds, verdict.seconds))
    if verdict.tpu_compiler == "unknown" and compared.ok:
        return replace(compared, tpu_compiler="unknown", message=f"{compared.message}; {verdict.message}")
    return replace(compared, tpu_compiler=verdict.tpu_compiler)


def _compare(case: GateCase, seed: int) -> CorrectnessResult:
    """The reduced run: the case's generated module and the eager reference on the same random inputs."""
    from ..tpu.runtime import load_entry, run

    start = time.perf_counter()
    shapes = format_args(case.args)
    every = case.reference_args or case.args
    drawn = Drawn(dict(every), seed, tables=tuple(case.tables))  # the reference process draws the same values
    inputs = dict(zip(every, drawn.values(), strict=True))  # a function argument draws nothing
    ours = [inputs[p] for p in case.params]  # the generated code's own: it may write into them
    written_back = [i for i, name in enumerate(every) if name in case.mutated]

    def done(verdict: Verdict, message: str, error: float | None = None) -> CorrectnessResult:
        seconds = case.prepare_seconds + time.perf_counter() - start
        return CorrectnessResult(verdict, message, shapes, error, seconds)

    # the reference runs in its process while the generated code runs here: it draws the same inputs itself
    # and sends back its result and the arguments the kernel writes; its reply is collected afterwards
    # either way, so the next check's reply is its own
    reference = reference_process().begin(
        case.kernel_source,
        case.kernel_name,
        drawn,
        block_sizes=list(case.block_sizes),
        filename=case.kernel_path or "<helion kernel source>",
        send_back=written_back,
        tunables=case.config,  # hl.register_tunable values, as compiled
    )
    try:
        fn = load_entry(case.module, case.entry, f"<pallas {case.kernel_name}>")
        got = run(fn, list(case.params), case.args, get_chip(case.chip), ours, list(case.mutated))
    except Exception as exc:  # noqa: BLE001 - the generated code failing is the finding
        with contextlib.suppress(ReferenceRunError):
            reference()
        return done("failed", f"the generated kernel raised {type(exc).__name__}: {_first_line(exc)}")
    try:
        want, theirs = reference()
    except ReferenceRunError as exc:
        return done("unverified", f"the eager reference could not run the kernel: {_first_line(exc)}")
    pairs = [(f"output {i}", g, w) for i, (g, w) in enumerate(zip(_flat(got), _flat(want), strict=False))]
    if len(_flat(got)) != len(_flat(want)):
        return done("wrong", f"returned {len(_flat(got))} values, the reference {len(_flat(want))}")
    written = dict(zip(every, theirs, strict=True))
    pairs += [
        (f"argument {name!r} (written in place)", o, written[name])
        for name, o in zip(case.params, ours, strict=True)
        if name in case.mutated
    ]
    worst = 0.0
    for what, g, w in pairs:
        if not isinstance(w, torch.Tensor):
            if g != w:
                return done("wrong", f"{what}: {g!r} != reference {w!r}")
            continue
        if not isinstance(g, torch.Tensor) or tuple(g.shape) != tuple(w.shape):
            return done(
                "wrong", f"{what}: shape {tuple(getattr(g, 'shape', ()))} != reference {tuple(w.shape)}"
            )
        if g.dtype != w.dtype:  # both sides run the same program: no dtype may differ (values alone could agree)
            return done("wrong", f"{what}: dtype {_dtype_name(g.dtype)} != reference {_dtype_name(w.dtype)}")
        error = _relative_error(g, w)
        worst = max(worst, error)
        limit = TOLERANCE.get(w.dtype, DEFAULT_TOLERANCE)
        if not error <= limit:  # NaN compares false: a NaN where the reference has a number is wrong
            return done(
                "wrong", f"{what}: error {error:.3g} of the reference's magnitude exceeds {limit:g}", error
            )
    floats = [w for _, _, w in pairs if isinstance(w, torch.Tensor) and w.dtype.is_floating_point and w.numel()]
    if floats and all(bool(w.isnan().all()) for w in floats):  # NaN in both everywhere: nothing was compared
        return done("unverified", "every output is NaN in both the kernel and the eager reference on the random "
                                  "inputs: nothing was compared", worst)
    return done("ok", f"matches the eager reference (worst error {worst:.2g})", worst)


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    g, w = got.detach().double(), want.detach().double()
    if g.numel() == 0:
        return 0.0
    same_nonfinite = (~torch.isfinite(w)) & ((g == w) | (torch.isnan(g) & torch.isnan(w)))
    diff = torch.where(same_nonfinite, torch.zeros_like(g), (g - w).abs())
    scale = torch.where(torch.isfinite(w), w.abs(), torch.zeros_like(w)).max().item()
    worst = diff.max().item()
    return worst / max(scale, 1e-30) if math.isfinite(worst) else math.nan


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _flat(result: Any) -> list[Any]:
    if result is None:
        return []
    if isinstance(result, tuple | list):
        return list(result)
    return [result]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
