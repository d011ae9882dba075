"""The correctness gate: a config is reported as best only after its generated code agreed with the eager
reference on reduced shapes.

It comes in two halves so that the process that searched does the compiling and a worker only runs code:
`prepare_check` shrinks the shapes and compiles the config for them (static work, in the tuning process,
whose compiler is warm) into a `GateCase` of plain data; `check_case` runs it (in a worker, which then never
traces a kernel and so never pays for torch's tracing machinery).

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
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import torch

from ..api import Kernel
from ..compiled import CompiledKernel
from ..ir.chips import Chip, get_chip
from ..ir.specs import ArgSpec, format_args
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
        return out


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

    @staticmethod
    def of(ck: CompiledKernel, config: Mapping[str, Any] | None = None, prepare_seconds: float = 0.0) -> GateCase:
        k = ck.kernel
        blocks = tuple(ck.config.get("block_sizes", []))
        # the generated function's own parameters: defaulted ones included, a lambda default left out
        full = k.with_defaults(dict(ck.args))
        reference_args = {p.arg: full[p.arg] for p in k.definition.node.args.args if p.arg in full}
        return GateCase(ck.source, ck.entry, tuple(ck.call_specs), dict(ck.call_specs), ck.chip.name, tuple(ck.mutated),
                        k.source, k.name, k.path, blocks, dict(config if config is not None else ck.config),
                        prepare_seconds, reference_args, ck.tables)  # fmt: skip


def prepare_check(
    kernel: Kernel, args: Mapping[str, ArgSpec], config: Mapping[str, Any], chip: Chip
) -> GateCase | CorrectnessResult:
    """Shrink the shapes and compile `config` for them; a config that does not compile is failed here, and so
    is one the TPU compiler rejects at the real shapes (tpu_rejects)."""
    start = time.perf_counter()
    try:
        small = reduced_args(kernel, args, config, chip)
        ck = kernel.compile(args=small, config=dict(config), chip=chip)
    except CompileError as exc:
        message = "; ".join(d.message for d in exc.diagnostics) or "compile error"
        return CorrectnessResult(
            "failed", f"does not compile: {message}", format_args(args), seconds=time.perf_counter() - start
        )
    rejected = tpu_rejects(kernel, args, config, chip)
    if rejected is not None:
        return replace(rejected, seconds=time.perf_counter() - start)
    return GateCase.of(ck, config, time.perf_counter() - start)


def tpu_rejects(
    kernel: Kernel, args: Mapping[str, ArgSpec], config: Mapping[str, Any], chip: Chip
) -> CorrectnessResult | None:
    """The failed verdict of a `config` the TPU compiler (libtpu's deviceless compile for `chip`) rejects at the
    real shapes, or None when it accepts it or cannot say (no libtpu). The reduced run cannot show what only
    the real shapes have: attention 8k's [1, 4096, 1024] unroll, 117 MiB by the VMEM report, needs 168.66 MiB
    of the v5e's 128 to the TPU compiler and failed on the chip. Out of VMEM, it says what was needed."""
    from ..tpu.libtpu_compile import libtpu_available

    if not libtpu_available():
        return None
    try:
        ck = kernel.compile(args=dict(args), config=dict(config), chip=chip)
    except CompileError:
        return None  # the search compiled it at these shapes; the reduced compile above says what is wrong
    errors = [d for d in ck.check_tpu_compile() if d.is_error]
    if not errors:
        return None
    first = errors[0]
    data = first.data or {}
    needed = data.get("requested_bytes") if data.get("kind") == "vmem_oom" else None
    message = f"the TPU compiler rejects it at {format_args(args)}: {first.code} {first.message}"
    return CorrectnessResult("failed", message, format_args(args), vmem_needed_bytes=needed,
                             vmem_estimated_bytes=ck.vmem.total_bytes if needed else None)


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
    """Run the case's generated module and the eager reference on the same random inputs and compare."""
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
