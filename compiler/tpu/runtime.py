"""Run a generated module: torch tensors in, torch tensors out.

On a machine whose jax sees a TPU of the chip the kernel was compiled for, the kernel runs there: the
arguments are copied onto that TPU and the results (and arguments written in place) come back as torch CPU
tensors. Otherwise it runs in TPU interpret mode on the CPU (zero-copy DLPack both ways) inside an abstract
mesh of the chosen chip (emit_pipeline and TPU lowering rules need the chip).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import glob
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..ir.callables import runtime_value
from ..ir.chips import Chip
from ..ir.specs import ArgSpec, CallableSpec, TensorSpec, format_spec

# XLA's CPU backend compiles an interpret-mode kernel (its body, the grid loop, the simulated DMAs) about
# twice as fast with its elemental emitters as with the newer MLIR fusion emitters: 0.45 -> 0.25 s for each
# of the tuner's checks of attention's winners, most of a check. Splitting the module's LLVM code generation
# across threads saves no time on a busy machine and costs ~0.15 CPU-s per check (1.09 -> 0.93 CPU-s for a
# check of attention's 32k winner, its wall time no longer). What runs is the same HLO either way.
FAST_CPU_COMPILE = ("--xla_cpu_use_fusion_emitters=false", "--xla_cpu_parallel_codegen_split_count=1")


def prefer_fast_cpu_compiles() -> None:
    """Add each of FAST_CPU_COMPILE's flags to XLA_FLAGS unless the user set that flag: effective when this
    process's jax has not started its CPU backend yet (XLA reads the flags then), harmless otherwise."""
    flags = os.environ.get("XLA_FLAGS", "")
    for flag in FAST_CPU_COMPILE:
        if flag.split("=")[0] not in flags:
            flags = f"{flags} {flag}".strip()
    os.environ["XLA_FLAGS"] = flags


class ChipBusy(RuntimeError):
    """Another program holds this machine's TPU: libtpu lets one process at a time open it."""


def tpu_device_files() -> list[str]:
    """TPU device nodes of this machine: /dev/accel* (v4, v5p) or /dev/vfio/N (v5e and later). Looked up
    without touching libtpu: on a machine without them, initialising the TPU backend only produces errors."""
    return sorted(glob.glob("/dev/accel*") + [p for p in glob.glob("/dev/vfio/*") if p.rsplit("/", 1)[1].isdigit()])


def claim_tpu() -> bool:
    """Let jax in this process find the machine's TPU, if it has one. The CLI pins JAX_PLATFORMS=cpu in its
    environment so that every process it starts (the eager reference, compile workers) stays off the chip,
    which only one process can hold; the one process that runs kernels lifts the pin for itself alone,
    before jax starts a backend. True when this process may now use a TPU."""
    if not tpu_device_files():
        return False
    import jax
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
        jax.config.update("jax_platforms", "")
    return tpu_device() is not None


class ChipRejected(RuntimeError):
    """The TPU's own compile of the kernel failed on the chip (Mosaic or XLA): the same verdict the deviceless
    libtpu compile gives on a CPU, classified the same way (kind: vmem_oom, alignment, vector_layout, ...)."""

    def __init__(self, chip: Chip, message: str):
        from .libtpu_compile import classify_compile_error

        found = classify_compile_error(message)
        self.kind: str = found["kind"]
        self.key_line: str = found["key_line"]
        self.message = message
        super().__init__(f"the TPU compiler rejected the kernel on the chip ({chip.name}, {self.kind}): "
                         f"{self.key_line[:300]}")


# a pinned worker (local_chips.pin_env) skips libtpu's lockfile: a chip another process has open then fails to
# open with the kernel's EBUSY
_BUSY = ("lockfile", "already in use", "TPU is in use", "Device or resource busy")


@functools.cache
def tpu_device() -> Any:
    """The TPU jax sees in this process, or None. ChipBusy when another program holds it (libtpu's
    multi-process lockfile): a run must not quietly fall back to interpret mode then."""
    import jax

    try:
        devices = jax.devices()
    except RuntimeError as exc:
        if any(b in str(exc) for b in _BUSY):
            raise ChipBusy("another program holds this machine's TPU (libtpu's multi-process lockfile): only one "
                           "process at a time can use it; end that program, or run with JAX_PLATFORMS=cpu to "
                           "interpret kernels on the CPU") from None
        return None
    return next((d for d in devices if d.platform == "tpu"), None)


def machine_chip() -> str | None:
    """The compiler.ir.chips name of the TPU this process can use, or None (no TPU, or one it does not know)."""
    from ..ir.chips import CHIP_NAMES, get_chip

    device = tpu_device()
    kind = device.device_kind if device is not None else None
    return next((name for name in CHIP_NAMES if get_chip(name).device_kind == kind), None)


def runs_on_chip(chip: Chip) -> bool:
    """Does a kernel compiled for `chip` run on a TPU here (rather than in interpret mode)? Only on that very
    chip: a v7x kernel on a v5e machine is interpreted, as on a laptop."""
    device = tpu_device()
    return device is not None and device.device_kind == chip.device_kind


_HLO_INTERPRETER = False  # see hlo_interpreter()


@contextlib.contextmanager
def hlo_interpreter():
    """Runs on a CPU use Pallas's HLO interpreter (`interpret=True`: the kernel body and its grid loop compiled by XLA)
    instead of TPU interpret mode, which simulates every grid step and its memory: ~9x faster on a large grid
    (vLLM's mla_decode_softmax_reduce, 2,048 steps of 4 splits: 17 s against 148 s, identical outputs) but blind to
    what only TPU interpret mode sees (races between grid steps, uninitialised reads, DMA and semaphore misuse).
    `check` uses it only where TPU interpret mode would take minutes, and says so on the row."""
    global _HLO_INTERPRETER
    before, _HLO_INTERPRETER = _HLO_INTERPRETER, True
    try:
        yield
    finally:
        _HLO_INTERPRETER = before


@contextlib.contextmanager
def chip_context(chip: Chip):
    """Make jax on a CPU machine look like `chip` (device kind, TPU info) for tracing and lowering."""
    import jax

    ad = jax.sharding.AbstractDevice(device_kind=chip.device_kind, num_cores=1, platform="tpu")
    with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((), (), abstract_device=ad)):
        yield


# jax's pallas_call lowering imports Mosaic GPU's interpreter (and with it MLIR's GPU dialects: ~0.6 s, most
# of a first check's extra cost) only to test whether `interpret` is a GPU interpreter's parameters.
_GPU_INTERPRETER = "jax._src.pallas.mosaic_gpu.interpret.interpret_pallas_call"


def skip_gpu_interpreter() -> None:
    """Make that import fail fast (None in sys.modules; pallas_call skips the GPU interpreter when it cannot
    be imported) unless it is already loaded: TPU interpret mode never uses it."""
    sys.modules.setdefault(_GPU_INTERPRETER, None)  # type: ignore[arg-type]


def load_entry(source: str, entry: str, filename: str = "<generated pallas>") -> Callable[..., Any]:
    """Execute a generated module (our own code, never the user's) and return its host function."""
    namespace: dict[str, Any] = {"__name__": "helion_generated"}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - generated by this compiler
    return namespace[entry]


def bind_call(fn: ast.FunctionDef, specs: dict[str, ArgSpec], args: Sequence[Any], kwargs: dict[str, Any],
              compiled_only: bool = False) -> tuple[list[str], dict[str, ArgSpec], list[Any]]:
    """A call as written (keywords, defaulted parameters left out) to the generated function's parameters,
    their specs and values. A parameter the kernel was compiled without was compiled with its default: the
    call must not give another value; a callable default (an epilogue lambda) is traced in, not passed.
    `compiled_only`: just the parameters and specs the generated function takes (no call to check)."""
    names = [a.arg for a in fn.args.args]
    defaults = dict(zip(names[len(names) - len(fn.args.defaults):], fn.args.defaults, strict=True))
    if len(args) > len(names):
        raise TypeError(f"{fn.name}() takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
    unknown = sorted(set(kwargs) - set(names))
    if unknown:
        raise TypeError(f"{fn.name}() got an unexpected keyword argument {unknown[0]!r}")
    params, out_specs, values = [], {}, []
    for i, name in enumerate(names):
        given = i < len(args) or name in kwargs
        if i < len(args) and name in kwargs:
            raise TypeError(f"{fn.name}() got multiple values for argument {name!r}")
        value = args[i] if i < len(args) else kwargs.get(name)
        if isinstance(specs.get(name), CallableSpec):  # compiled in: the call must pass that very function
            if given and not compiled_only:
                _same_function(name, specs[name], value)
            elif not compiled_only and name not in defaults:
                raise TypeError(f"{fn.name}() missing argument {name!r}")
            continue
        if name in specs:
            if not given and not compiled_only:
                if name not in defaults:
                    raise TypeError(f"{fn.name}() missing argument {name!r}")
                value = _literal(defaults[name])
            params.append(name)
            out_specs[name] = specs[name]
            values.append(value)
            continue
        if name not in defaults:
            if compiled_only:
                continue
            raise TypeError(f"{fn.name}() missing argument {name!r}")
        default = _literal(defaults[name])
        if default is _NOT_LITERAL:  # a lambda default: part of the compiled code
            if given:
                raise TypeError(f"`{name}` was compiled with its default (a function); compile with the value "
                                "you pass instead")
            continue
        params.append(name)
        out_specs[name] = default
        values.append(value if given else default)
    return params, out_specs, values


_NOT_LITERAL = object()


def _same_function(name: str, spec: CallableSpec, value: Any) -> None:
    from ..ir.callables import callable_spec

    got = callable_spec(value, name) if callable(value) else None
    if got is None or not got.same_code(spec):
        raise ValueError(f"{name}: compiled for the function {spec}, called with {got or repr(value)}; compile for "
                         "this one")


def _literal(node: ast.expr) -> Any:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return _NOT_LITERAL
    return value


def check_call_args(params: list[str], specs: dict[str, ArgSpec], args: Sequence[Any]) -> None:
    if len(args) != len(params):
        raise TypeError(f"expected {len(params)} arguments ({', '.join(params)}), got {len(args)}")
    for name, value in zip(params, args, strict=True):
        spec = specs[name]
        if isinstance(spec, TensorSpec):
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{name}: expected a tensor {format_spec(spec)}, got {type(value).__name__}")
            if tuple(value.shape) != spec.shape or value.dtype != spec.dtype:
                got = format_spec(TensorSpec(value.dtype, tuple(value.shape)))
                raise ValueError(f"{name}: compiled for {format_spec(spec)}, called with {got}; compile for these shapes")
            if spec.strides is not None and tuple(value.stride()) != spec.strides:  # its host code read them
                got = format_spec(TensorSpec(value.dtype, tuple(value.shape), tuple(value.stride())))
                raise ValueError(f"{name}: compiled for {format_spec(spec)}, called with {got}; compile for this layout")
        elif isinstance(value, torch.Tensor):
            raise TypeError(f"{name}: expected a scalar {spec!r}, got a tensor")
        elif value != runtime_value(spec):
            raise ValueError(f"{name}: compiled for the constant {spec!r}, called with {value!r}")


def to_jax(t: torch.Tensor, name: str = "an argument", device: Any = None) -> Any:
    """A contiguous jax array of `t`: a zero-copy view on the CPU, or a copy on `device` (a TPU). int64
    becomes int32 (TPUs have no 64-bit vector types; the kernel reads it as int32), after checking every value
    fits: jax itself would wrap 2**40 to 0 without a word."""
    import jax

    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.int64:
        t = narrow_int64(t, name)
    array = jax.dlpack.from_dlpack(t.contiguous())
    # DLPack gives an array committed to jax's CPU device, where a TPU pallas_call cannot run
    return array if device is None else jax.device_put(array, device)


INT32 = torch.iinfo(torch.int32)


def narrow_int64(t: torch.Tensor, name: str) -> torch.Tensor:
    """`t` as int32, or OverflowError naming the argument and the first value that does not fit."""
    if t.numel():
        bad = (t < INT32.min) | (t > INT32.max)
        if bool(bad.any()):
            at = tuple(int(i) for i in bad.nonzero()[0])
            raise OverflowError(f"{name} is int64 and the kernel reads it as int32 (TPUs have no 64-bit vector "
                                f"types), but its value {int(t[at])} at {list(at)} does not fit in int32")
    return t.to(torch.int32)


def to_torch(a: Any) -> torch.Tensor:
    """A torch CPU tensor of a jax array: zero-copy from the CPU, copied back from a TPU first."""
    import jax

    if any(d.platform != "cpu" for d in a.devices()):
        a = jax.device_put(a, jax.devices("cpu")[0])
    return torch.from_dlpack(a)


def run(fn: Callable[..., Any], params: list[str], specs: dict[str, ArgSpec], chip: Chip, args: Sequence[Any],
        mutated: list[str]) -> Any:
    """Call the host function; copy results of in-place stores back into the caller's tensors."""
    prefer_fast_cpu_compiles()
    import jax
    from jax.experimental.pallas import tpu as pltpu

    check_call_args(params, specs, args)
    device = tpu_device() if runs_on_chip(chip) else None
    tensors = [to_jax(a, f"`{n}`", device) for n, a in zip(params, args, strict=True)
               if isinstance(specs[n], TensorSpec)]
    scalars = {n: a for n, a in zip(params, args, strict=True) if not isinstance(specs[n], TensorSpec)}
    if device is not None:
        try:
            result = fn(*tensors, **scalars)
            jax.block_until_ready(result)
        except Exception:
            _raise_if_rejected(fn, tensors, scalars, chip)
            raise
    else:
        skip_gpu_interpreter()
        with chip_context(chip):
            try:
                result = fn(*tensors, **scalars, interpret=True if _HLO_INTERPRETER else pltpu.InterpretParams())
                jax.block_until_ready(result)
            except Exception:
                pltpu.reset_tpu_interpret_mode_state()
                raise
    if mutated:
        *rest, = result if isinstance(result, tuple) else (result,)
        updates, rest = rest[len(rest) - len(mutated):], rest[: len(rest) - len(mutated)]
        by_name = dict(zip(params, args, strict=True))
        for name, value in zip(mutated, updates, strict=True):
            by_name[name].copy_(to_torch(value))
        if not rest:
            return None
        result = tuple(rest) if len(rest) > 1 else rest[0]
    return _convert(result)


def _raise_if_rejected(fn: Callable[..., Any], tensors: list[Any], scalars: dict[str, Any], chip: Chip) -> None:
    """After a failed call on the chip: ChipRejected when compiling the kernel alone fails (the compiler's
    verdict), else return and let the caller re-raise the run's own error."""
    try:
        fn.lower(*tensors, **scalars).compile()
    except Exception as exc:  # noqa: BLE001 - whatever the TPU compiler raises is its verdict
        raise ChipRejected(chip, str(exc)) from None


def _convert(result: Any) -> Any:
    if isinstance(result, tuple | list):
        return tuple(_convert(r) for r in result)
    if result is None or isinstance(result, int | float):
        return result
    return to_torch(result)
