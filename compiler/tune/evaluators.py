"""Evaluators: how fast is one config of one kernel for one shape set on one chip — selected by name.

  model    the analytic model (model.py) on the compiled plan: a fraction of a millisecond after the ~10 ms
           compile, so it drives the search. An estimate for the named chip.
  compile  the real libtpu compile for the chip (compiler.tpu.tpu_compile, deviceless, 1-100 s each):
           rejects what the TPU compiler rejects (VMEM, layouts, ...); for kernels whose every inner loop is
           unrolled the estimate is refined from the compiled kernel's vector op counts. Still an estimate.
  schedule the TPU compiler's own estimate (schedule.py: libtpu's simulated cycles on v5e/v5p/v6e, bundles
           issued elsewhere; a worker with an address-space limit, one simulation at a time, 5-60 s each).
           Labelled "TPU compiler estimate"; deterministic, so a stored result is never recomputed.
  tpu      wall-clock on a TPU that jax sees: warm-up, then the median of repeated device-synchronised runs.
           Refuses (EvaluatorUnavailable) where no TPU of the asked chip is visible.

compile, schedule and tpu are too slow to drive a search: the driver searches with the model and hands them the
best candidates. compile, tpu and the correctness gate execute in worker processes through an
executor; the functions they run (`evaluate`, `verify`, `probe_tpu`, and the gate worker's `warm_gate.warm_up`)
are top-level and take picklable arguments (a `Problem`, a `GateCase`), so they cross process (and Ray)
boundaries. The gate's
compile for reduced shapes (`gate_case`) runs in the tuning process; workers only run code. (The model
itself needs no worker: the driver runs it in-process on each config's one compile.)
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..compiled import CompiledKernel
from ..ir.chips import Chip, get_chip
from ..support.diagnostics import CompileError
from . import collector
from .constants import constants_for
from .correctness import CorrectnessResult, GateCase, check_case, prepare_check
from .model import estimate
from .problem import Problem


class EvaluatorUnavailable(RuntimeError):
    """The evaluator cannot run here (no libtpu, no TPU, a different TPU than asked for)."""


@dataclass(frozen=True)
class Measurement:
    """What an evaluator says of one config. seconds None: unusable (see error)."""

    seconds: float | None
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def outcome(self) -> tuple[float | None, dict[str, Any]]:
        """The (score, info) pair the search expects."""
        info = dict(self.metrics)
        if self.error is not None:
            info["error"] = self.error
        return self.seconds, info


def _figures(seconds: float, ck: CompiledKernel, estimated: bool) -> dict[str, Any]:
    plan, chip = ck.plan, ck.chip
    bound = max(plan.flops / chip.bf16_flops, plan.hbm_bytes / chip.hbm_bandwidth)
    return {
        "seconds": seconds,
        "tflops": plan.flops / seconds / 1e12,
        "gbps": plan.hbm_bytes / seconds / 1e9,
        "roofline_fraction": bound / seconds,
        "estimate": estimated,
        "chip": chip.name,
        "vmem_bytes": ck.vmem.total_bytes,
        "vmem_verdict": ck.vmem.verdict,
    }


class Evaluator:
    """Base class: `name`, what each evaluation needs (`resources`), whether figures are `estimated`, whether
    the same config always gives the same figure (`deterministic`: a stored result is reused) and whether
    evaluations must run one at a time (`serial`)."""

    name = ""
    estimated = True
    deterministic = False
    serial = False
    resources: dict[str, float] = {"CPU": 1.0}

    def measure(self, ck: CompiledKernel) -> Measurement:
        raise NotImplementedError

    def available(self) -> str | None:
        """None when usable in this process, else why not (checked before a run starts)."""
        return None


class ModelEvaluator(Evaluator):
    name = "model"

    def measure(self, ck: CompiledKernel) -> Measurement:
        est = estimate(ck.plan, ck.chip)
        metrics = _figures(est.seconds, ck, True) | {
            "resolution": constants_for(ck.chip.name).resolution,
            "calibrated": est.calibrated,
            "bound": est.bound,
            "breakdown": est.breakdown,
            "work": est.work,
        }
        return Measurement(est.seconds, metrics)


class CompileEvaluator(Evaluator):
    name = "compile"

    def available(self) -> str | None:
        from ..tpu.libtpu_compile import libtpu_available

        return None if libtpu_available() else "libtpu is not installed (pip install libtpu==0.0.42.1)"

    def measure(self, ck: CompiledKernel) -> Measurement:
        from ..tpu.libtpu_compile import LibtpuUnavailable, tpu_compile

        try:
            result = tpu_compile(ck.source, ck.entry, ck.compile_args(), ck.chip)
        except LibtpuUnavailable as exc:
            raise EvaluatorUnavailable(str(exc)) from None
        if not result.ok:
            return Measurement(
                None,
                {"compile_seconds": result.seconds, "compile_kind": result.kind},
                f"libtpu rejects it ({result.kind}): {result.key_line or result.error[:300]}",
            )
        per_call = {dump.name: dump.categories for dump in result.kernels}
        compiled = {
            call.name: vector_seconds(cats, ck.chip.name)
            for call in ck.plan.calls
            for name, cats in per_call.items()
            if call.name in name and not any(lp.strategy != "unroll" for lp in call.inner_loops)
        }
        est = estimate(ck.plan, ck.chip, compiled_vector=compiled)
        metrics = _figures(est.seconds, ck, True) | {
            "resolution": constants_for(ck.chip.name).resolution,
            "calibrated": est.calibrated,
            "bound": est.bound,
            "breakdown": est.breakdown,
            "refined_from_op_counts": sorted(compiled),
            "compile_seconds": result.seconds,
            "vmem_used_bytes": result.vmem_used_bytes,
            "vmem_limit_bytes": result.vmem_limit_bytes,
            "op_categories": result.categories,
        }
        return Measurement(est.seconds, metrics)


class ScheduleEvaluator(Evaluator):
    """The TPU compiler's estimate (schedule.py); its figures are the compiler's, never the model's."""

    name = "schedule"
    deterministic = True
    serial = True  # each simulation can take GBs: one at a time

    def available(self) -> str | None:
        from ..tpu.libtpu_compile import libtpu_available

        return None if libtpu_available() else "libtpu is not installed (pip install libtpu==0.0.42.1)"

    def measure(self, ck: CompiledKernel) -> Measurement:
        from .schedule import ScheduleUnavailable, schedule_estimate

        try:
            est = schedule_estimate(ck)
        except ScheduleUnavailable as exc:
            raise EvaluatorUnavailable(str(exc)) from None
        metrics = est.to_metrics()
        if est.seconds is None:
            return Measurement(None, metrics, est.error or "the TPU compiler gave no estimate")
        return Measurement(est.seconds, _figures(est.seconds, ck, True) | metrics)


def vector_seconds(categories: Mapping[str, int], chip: str) -> float:
    """Vector-unit seconds of one grid step on `chip` from libtpu's static op counts of straight-line code."""
    c = constants_for(chip)
    ops = sum(categories.get(k, 0) for k in ("vector_alu", "cross_lane", "vector_load", "vector_store"))
    eup = categories.get("transcendental", 0) * c.vpu_rate / c.eup_rate
    return (ops + eup) * c.llo_vector_op_seconds


TIMED_SECONDS = 0.5  # how long the tpu evaluator's timed calls of one config last, roughly
WARM_BELOW = TIMED_SECONDS / 20  # a kernel slower than this has warmed up in its first, untimed call


class TpuEvaluator(Evaluator):
    name = "tpu"
    estimated = False
    resources = {"TPU": 1.0}
    warmup = 3  # untimed calls before timing a kernel quicker than WARM_BELOW

    def __init__(self) -> None:
        # the last inputs put on the chip, by their shapes: the configs of one problem share them, and drawing
        # and copying GiBs (attention 8k: 3 GiB) for each would take longer than timing it
        self._last: tuple[tuple[Any, ...], list[Any], dict[str, Any]] | None = None

    def _inputs(self, ck: CompiledKernel, device: Any, make_inputs: Callable[..., list[Any]],
                to_jax: Callable[..., Any]) -> tuple[list[Any], dict[str, Any]]:
        """The call's arrays on `device` and its scalars, drawn with seed 0 (the same for every config)."""
        key = (device.id, tuple((n, repr(s)) for n, s in ck.call_specs.items()))  # the scalars' values too
        if self._last is not None and self._last[0] == key:
            return self._last[1], self._last[2]
        self._last = None  # the previous problem's arrays go before this one's are made
        arrays, scalars, scalar_names = [], {}, ck.scalar_args()
        for name, value in zip(ck.call_specs, make_inputs(ck.call_specs, seed=0), strict=True):
            if name in scalar_names:
                scalars[name] = value
            else:
                arrays.append(to_jax(value, f"`{name}`", device))
        self._last = (key, arrays, scalars)
        return arrays, scalars

    def measure(self, ck: CompiledKernel) -> Measurement:
        from ..reference import make_inputs
        from ..tpu.local_chips import measured_on
        from ..tpu.runtime import load_entry, to_jax

        device = _require_tpu(ck.chip)
        fn = load_entry(ck.source, ck.entry, f"<pallas {ck.kernel.name}>")
        arrays, scalars = self._inputs(ck, device, make_inputs, to_jax)
        try:  # the chip's own compile first: a config it rejects (VMEM, alignment) is a result, not a crash
            fn.lower(*arrays, **scalars).compile()
        except Exception as exc:  # noqa: BLE001 - whatever the TPU compiler raises is its verdict
            from ..tpu.libtpu_compile import classify_compile_error

            key_line = classify_compile_error(str(exc))["key_line"]
            return Measurement(None, error=f"the TPU compiler rejects it: {key_line[:300]}")
        times, per_loop = time_on_device(lambda: fn(*arrays, **scalars), self.warmup)
        seconds = min(times)
        check = check_where_kernels_run(ck)
        metrics = _figures(seconds, ck, False) | {
            "repeats": per_loop * len(times),
            "calls_per_loop": per_loop,
            "median_seconds": statistics.median(times),
            "max_seconds": max(times),
            "min_seconds": seconds,
            "spread": max(times) / seconds - 1,
            "device_kind": device.device_kind,
            "measured_on": measured_on(device.id),  # host and chip: one worker per chip (chip_workers.py)
            "chip_correctness": check.to_json(),
        }
        if check.verdict in ("wrong", "failed"):  # fast and wrong on the chip is not a result
            return Measurement(None, metrics, error=f"on the chip ({device.device_kind}): {check.message}")
        return Measurement(seconds, metrics)


def check_where_kernels_run(ck: CompiledKernel, seed: int = 0) -> CorrectnessResult:
    """`ck`'s config on the gate's reduced shapes, run where this process runs kernels (on the TPU the tpu
    evaluator's worker holds; in interpret mode on a CPU), against the eager reference: the gate's verdict
    comes from interpret mode, and a measured config is also checked on the chip it was measured on."""
    from .shrink import reduced_args

    start = time.perf_counter()
    config = dict(ck.config)
    small = ck.kernel.compile(args=reduced_args(ck.kernel, ck.args, config, ck.chip), config=config, chip=ck.chip)
    return check_case(GateCase.of(small, config, time.perf_counter() - start), seed)


LOOPS = 5  # loops of pipelined calls the tpu evaluator times per config: the best is its figure
SLOW_CALL = 1.0  # seconds: a kernel this slow is timed in two loops of one call


def time_on_device(call: Callable[[], Any], warmup: int = TpuEvaluator.warmup) -> tuple[list[float], int]:
    """How the tpu evaluator times a jax call (bench/vs_xla.py times XLA and JAX's kernels so too): one untimed
    call (the jit's compile), one timed; `warmup` more for a kernel quicker than WARM_BELOW; then time_pipelined.
    Returns its seconds per call of each loop and the calls per loop."""
    import jax

    first = time_calls(lambda: jax.block_until_ready(call()), 1, 1)[0]
    if first < WARM_BELOW:
        time_calls(lambda: jax.block_until_ready(call()), warmup, 0)
    return time_pipelined(call, first)


def time_pipelined(call: Callable[[], Any], first: float, loops: int = LOOPS) -> tuple[list[float], int]:
    """Seconds per call of `loops` loops of k calls issued back to back with one wait at the end of each, and k.

    jax dispatches asynchronously: the chip runs a loop's calls one after another with no round trip to the
    host between them, so a kernel of microseconds is timed as itself, not as its dispatch (one call at a time,
    each waited for, was). k makes a loop last about TIMED_SECONDS / loops: one call of a kernel of a second.
    A kernel of SLOW_CALL or more gets two loops of one call: its dispatch is nothing beside it and its calls
    differ by well under a percent, so five would only spend the chip's time (a sweep's 6-second configs)."""
    import jax

    if first >= SLOW_CALL:
        loops = min(loops, 2)
    k = max(1, min(100_000, round(TIMED_SECONDS / loops / max(first, 1e-9))))
    times = []
    for _ in range(loops):
        start = time.perf_counter()
        out = None
        for _ in range(k):
            out = call()
        jax.block_until_ready(out)
        times.append((time.perf_counter() - start) / k)
    return times, k


def time_calls(call: Callable[[], object], warmup: int, repeats: int) -> list[float]:
    """Wall seconds of `repeats` calls after `warmup` untimed ones (the first call compiles); `call` must
    wait for its result (jax.block_until_ready)."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def _require_tpu(chip: Chip) -> Any:
    """The TPU device of `chip` that jax in this process can use, else EvaluatorUnavailable saying why."""
    from ..tpu.runtime import ChipBusy, claim_tpu, tpu_device, tpu_device_files

    if not tpu_device_files():
        raise EvaluatorUnavailable(
            "no TPU on this machine (no /dev/accel* or /dev/vfio/N device); the tpu evaluator measures "
            "wall-clock time on a real TPU — use --evaluator model or compile here, or --executor ray:ADDRESS "
            "with TPU workers"
        )
    try:
        claim_tpu()
        device = tpu_device()
    except ChipBusy as exc:
        raise EvaluatorUnavailable(str(exc)) from None
    if device is None:
        raise EvaluatorUnavailable("this machine has TPU device nodes but jax sees no TPU")
    if device.device_kind != chip.device_kind:
        raise EvaluatorUnavailable(
            f"jax sees a {device.device_kind!r} TPU, but the tuning is for {chip.name} "
            f"({chip.device_kind!r}); pass --chip for the TPU you have"
        )
    return device


EVALUATORS: dict[str, type[Evaluator]] = {
    "model": ModelEvaluator,
    "compile": CompileEvaluator,
    "schedule": ScheduleEvaluator,
    "tpu": TpuEvaluator,
}


@functools.cache
def get_evaluator(name: str) -> Evaluator:
    """The process's one evaluator of that name: the tpu evaluator keeps the inputs it put on the chip between
    the configs it measures (attention 8k's take ~25 s to draw on a CPU)."""
    try:
        return EVALUATORS[name]()
    except KeyError:
        raise ValueError(f"unknown evaluator {name!r}: use {', '.join(EVALUATORS)}") from None


# ---- the functions executors run ------------------------------------------------------------------------------


def evaluate(
    problem: Problem, evaluator: str, config: Mapping[str, Any]
) -> tuple[float | None, dict[str, Any]]:
    """Compile `config` and measure it: (seconds or None, info). Compile errors are results, not exceptions."""
    try:
        ck = problem.compile(config)
    except CompileError as exc:
        return None, {"error": "; ".join(d.message for d in exc.diagnostics) or "compile error"}
    return get_evaluator(evaluator).measure(ck).outcome()


def gate_case(problem: Problem, config: Mapping[str, Any]) -> GateCase | CorrectnessResult:
    """The first half of the gate, in the tuning process: `config` compiled for reduced shapes (static work:
    no user code runs), or the failed verdict of a config that does not compile for them."""
    return prepare_check(problem.load_kernel(), problem.args, config, get_chip(problem.chip))


def verify(case: GateCase, seed: int = 0) -> CorrectnessResult:
    """The second half of the gate: run the generated module and the eager reference (user code: only in a
    worker)."""
    with collector.paused():  # (collector.py)
        return check_case(case, seed)


def probe_tpu(chip: str) -> str | None:
    """None when a TPU of `chip` is visible to jax in this process, else why not (for a pre-flight check)."""
    try:
        _require_tpu(get_chip(chip))
    except EvaluatorUnavailable as exc:
        return str(exc)
    return None
