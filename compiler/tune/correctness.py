"""The correctness gate: a config is reported as best only after its generated code agreed with the eager
reference on reduced shapes.

The generated module runs (TPU interpret mode on a CPU machine) on random inputs of the reduced shapes
(shrink.py) and its results — returned tensors and tensors it wrote in place — are compared with the eager
reference run of the ORIGINAL kernel source (compiler.reference) on the same inputs and block sizes. A
mismatch is a wrong result; code that raises is a failure; a reference that cannot run the kernel leaves
the config unverified (that is no fault of the config). The reference runs user code, so it runs in its
own resource-limited process (compiler.reference.isolated); still, never call this in the language server.
"""

from __future__ import annotations

import atexit
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import torch

from ..api import CompiledKernel, Kernel
from ..chips import Chip
from ..diagnostics import CompileError
from ..reference import ReferenceProcess, ReferenceRunError, make_inputs
from ..specs import ArgSpec, format_args
from .shrink import reduced_args

# Largest error allowed, relative to the largest magnitude of the reference output, by output dtype. Both
# sides compute in the same dtypes with the same block sizes; what differs is accumulation order and the
# rounding of intermediates (bf16 keeps 8 bits of mantissa: ~0.4% per rounding, compounded over a few ops).
TOLERANCE = {torch.float32: 1e-3, torch.float64: 1e-6, torch.bfloat16: 3e-2, torch.float16: 1e-2}
DEFAULT_TOLERANCE = 3e-2

Verdict = Literal["ok", "wrong", "failed", "unverified"]


@dataclass(frozen=True)
class CorrectnessResult:
    verdict: Verdict
    message: str
    shapes: str  # the reduced shapes the check ran on
    max_error: float | None = None  # worst error relative to the reference's largest magnitude
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "message": self.message,
            "shapes": self.shapes,
            "max_error": self.max_error,
            "seconds": self.seconds,
        }


_reference: ReferenceProcess | None = None


def reference_process() -> ReferenceProcess:
    """This process's eager-reference worker (separate, resource-limited, started on first use)."""
    global _reference
    if _reference is None:
        _reference = ReferenceProcess()
        atexit.register(_reference.close)
    return _reference


def check_config(
    kernel: Kernel, args: Mapping[str, ArgSpec], config: Mapping[str, Any], chip: Chip, seed: int = 0
) -> CorrectnessResult:
    """Shrink the shapes, compile `config` for them and compare with the reference."""
    start = time.perf_counter()
    try:
        small = reduced_args(kernel, args, config, chip)
        ck = kernel.compile(args=small, config=dict(config), chip=chip)
    except CompileError as exc:
        message = "; ".join(d.message for d in exc.diagnostics) or "compile error"
        return CorrectnessResult(
            "failed", f"does not compile: {message}", format_args(args), seconds=time.perf_counter() - start
        )
    result = check_compiled(ck, seed)
    return CorrectnessResult(
        result.verdict, result.message, result.shapes, result.max_error, time.perf_counter() - start
    )


def check_compiled(ck: CompiledKernel, seed: int = 0) -> CorrectnessResult:
    """Run `ck` (its generated module, as it stands) and the eager reference on the same random inputs."""
    start = time.perf_counter()
    shapes = format_args(ck.args)
    inputs = make_inputs(ck.args, seed)
    ours = [_clone(a) for a in inputs]
    theirs = [_clone(a) for a in inputs]

    def done(verdict: Verdict, message: str, error: float | None = None) -> CorrectnessResult:
        return CorrectnessResult(verdict, message, shapes, error, time.perf_counter() - start)

    try:
        got = ck(*ours)
    except Exception as exc:  # noqa: BLE001 - the generated code failing is the finding
        return done("failed", f"the generated kernel raised {type(exc).__name__}: {_first_line(exc)}")
    try:
        want, theirs = reference_process().run(
            ck.kernel.source,
            ck.kernel.name,
            theirs,
            block_sizes=list(ck.config.get("block_sizes", [])),
            filename=ck.kernel.path or "<helion kernel source>",
        )
    except ReferenceRunError as exc:
        return done("unverified", f"the eager reference could not run the kernel: {_first_line(exc)}")
    pairs = [(f"output {i}", g, w) for i, (g, w) in enumerate(zip(_flat(got), _flat(want), strict=False))]
    if len(_flat(got)) != len(_flat(want)):
        return done("wrong", f"returned {len(_flat(got))} values, the reference {len(_flat(want))}")
    pairs += [
        (f"argument {name!r} (written in place)", o, t)
        for name, o, t in zip(ck.kernel.params, ours, theirs, strict=True)
        if name in ck.mutated
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
        error = _relative_error(g, w)
        worst = max(worst, error)
        limit = TOLERANCE.get(w.dtype, DEFAULT_TOLERANCE)
        if not error <= limit:  # NaN compares false: a NaN where the reference has a number is wrong
            return done(
                "wrong", f"{what}: error {error:.3g} of the reference's magnitude exceeds {limit:g}", error
            )
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


def _clone(a: Any) -> Any:
    return a.clone() if isinstance(a, torch.Tensor) else a


def _flat(result: Any) -> list[Any]:
    if result is None:
        return []
    if isinstance(result, tuple | list):
        return list(result)
    return [result]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
