"""The real TPU compile without a TPU: libtpu's deviceless compile of a generated Pallas module.

How: `jax.experimental.topologies.get_topology_desc(chip.topology_name, "tpu", ...)` gives compile-only TPU
devices; the host function is jitted with a 1-device `NamedSharding` and `.trace().lower().compile()`d under
that mesh's abstract mesh. The compiled object is never run. It catches what Mosaic lowering cannot: VMEM
overflow (scoped limit or capacity), vector layouts, unproven alignment, dtypes a chip lacks.

Why a worker subprocess (and why the API takes module source text + entry name, not a callable):
- The Mosaic pass dump is switched on by `LIBTPU_INIT_ARGS=--xla_mosaic_dump_to=DIR`, read once when libtpu
  initialises in a process; it is not a per-compile option (`compile({"xla_mosaic_dump_to": ...})` is rejected
  as "No such compile option"). The worker owns one dump directory, empties it before each compile and reads
  the files that compile wrote, so repeated compiles in one process each get their own dump.
- A fatal libtpu error would take its process down, and a capacity-OOM compile can take ~10 s; a child isolates
  crashes and lets a timeout kill it. The next compile starts a fresh worker.
- The language server must not run user-derived code in its own process, nor load libtpu there.
- libtpu takes a machine-wide lock file (/tmp/libtpu_lockfile) unless `ALLOW_MULTIPLE_LIBTPU_LOAD=1`; the
  worker sets it so several workers (and other tools) can compile at once. The worker also sets
  `JAX_PLATFORMS=cpu` (never grab a real TPU), `TPU_SKIP_MDS_QUERY=1` (no metadata-server lookups) and
  `--xla_mosaic_enable_dump_debug_info=true` (dumps keep source locations, used to place errors).
A `TpuCompiler` is one worker; compiles on it are serial. `tpu_compile` uses a shared default worker.

The TPU compiler's own schedule (`schedule="bundles"` or `"cycles"`): the worker is started with libtpu's LLO
dump flags (`--xla_jf_dump_to` with the `final` pass label; for "cycles" also
`--xla_jf_dump_static_llo_profile_to`, which simulates each kernel and aborts the process on chips without
the simulator) and reports each kernel's scheduled bundles and simulated cycles (compiler.tpu.llo_dump).
Simulating costs memory in proportion to the bundles executed, so such a worker gets an address-space limit
(`memory_limit`); a simulation over it ends the worker, not the caller, and is reported as a crash.

Arguments: `jax.ShapeDtypeStruct` for arrays; Python int/float are static (baked in), as in `lower_check`.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..support import lifeline
from .llo_dump import KernelSchedule
from .mlir_text import SourceLoc
from .mosaic_dump import CATEGORIES, KernelDump

if TYPE_CHECKING:
    from compiler.ir.chips import Chip

    from .lowering import Arg

CompileKind = Literal[
    "vmem_oom", "hbm_oom", "vector_layout", "alignment", "unsupported_dtype", "other", "timeout", "crash"
]
Stage = Literal["load", "lowering", "compile", "worker"]

DUMP_DIR_ENV = "HELION_LIBTPU_DUMP_DIR"
SCHEDULE_DIR_ENV = "HELION_LIBTPU_SCHEDULE_DIR"  # set: the worker reads LLO bundle dumps from here
PROFILE_DIR_ENV = "HELION_LIBTPU_PROFILE_DIR"  # set: ... and simulated cycles from here
MEMORY_LIMIT_ENV = "HELION_LIBTPU_MEMORY_LIMIT"  # bytes of address space the worker may use
READY_LINE = '{"ready": true}\n'  # the worker's first line, once jax and libtpu are imported
# how long a worker may take to import jax and libtpu: not part of a compile's time limit (seconds when idle,
# a minute on two cores that other jobs keep busy)
STARTUP_TIMEOUT = 300.0
ScheduleMode = Literal["bundles", "cycles"]
_REPO_ROOT = str(Path(__file__).resolve().parents[2])

# First match wins; the matching line is reported verbatim as `key_line`.
_KIND_PATTERNS: tuple[tuple[CompileKind, re.Pattern[str]], ...] = (
    (
        "vmem_oom",
        re.compile(r"memory space vmem|ScopedVmemOom|scoped vmem limit|vmem capacity|space=vmem", re.I),
    ),
    ("hbm_oom", re.compile(r"out of memory on HBM|exceeds available HBM", re.I)),
    ("alignment", re.compile(r"Alignment|cannot statically prove|not aligned|misaligned", re.I)),
    (
        "unsupported_dtype",
        re.compile(r"Unsupported \w+ type|Invalid vector type|unsupported (?:element )?type", re.I),
    ),
    ("vector_layout", re.compile(r"vector[- ]layout|shape cast|relayout|Not implemented", re.I)),
)
_LAYOUT_PASSES = ("infer-vector-layout", "relayout-insertion", "apply-vector-layout")
_SIZE = r"([\d.]+)([KMGT]?)B?"
_SCOPED_OOM = re.compile(rf"size {_SIZE} and limit {_SIZE} exceeded scoped vmem limit by {_SIZE}")
_CAPACITY_OOM = re.compile(rf"Used {_SIZE} of {_SIZE} vmem\. Exceeded vmem capacity by {_SIZE}")
_SINGLE_OOM = re.compile(
    r"Allocation \(size=(\d+)\) would exceed memory \(size=(\d+)\)(?=.*space=vmem)", re.S
)
_SINGLE_TAG = re.compile(r"tag = '([^']*)'")
_ALLOCATION = re.compile(r"^\s*\d+\. Size: " + _SIZE + r"\s*$(.*?)(?=^\s*\d+\. Size:|\Z)", re.M | re.S)
_TAG = re.compile(r"Tag: (.*)")
_OPERAND = re.compile(r"operator (input|output) (\d+)")
_WINDOW = re.compile(r"window shape is (\S+?\[[^\]]*\])")
_BUFFERS = re.compile(r"has (\d+) buffering levels")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class LibtpuUnavailable(RuntimeError):
    """libtpu is not installed here, so the real TPU compile cannot run (`pip install libtpu==0.0.42.1`)."""


@cache
def libtpu_available() -> bool:
    """Whether the libtpu wheel is installed (looked up, not imported)."""
    spec = importlib.util.find_spec("libtpu")
    if spec is None or not spec.submodule_search_locations:
        return False
    return any((Path(loc) / "libtpu.so").is_file() for loc in spec.submodule_search_locations)


@dataclass(frozen=True)
class VmemAllocation:
    """One of the largest VMEM allocations libtpu lists when a kernel exceeds VMEM capacity."""

    size_bytes: int  # as printed (MiB with two decimals), converted to bytes
    tag: str  # verbatim, e.g. "input window allocation for operator input 0. The window shape is ..."
    operand_kind: Literal["input", "output"] | None = None
    operand_index: int | None = None
    window: str | None = None  # e.g. "f32[4096,4096]"
    buffers: int | None = None

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class TpuCompileResult:
    """Outcome of one deviceless compile.

    stage:        how far it got: "load" (module source / entry), "lowering" (jax trace + Mosaic lowering),
                  "compile" (libtpu), "worker" (the worker died or timed out).
    kind:         None when ok; "vmem_oom" | "vector_layout" | "alignment" | "unsupported_dtype" | "other";
                  "timeout" / "crash" when the worker had to be killed or died.
    key_line:     the verbatim error line that decided `kind`.
    numbers:      vmem_oom: requested_bytes, limit_bytes, exceeded_bytes (rounded as libtpu prints them, MiB
                  with two decimals); `oom_limit` says whether the limit was the scoped limit or the VMEM
                  capacity. When a single allocation alone exceeds VMEM (v4 words it "Allocation (size=N) would
                  exceed memory (size=M)"), requested_bytes is that allocation and there is no exceeded_bytes.
    allocations:  the largest VMEM allocations libtpu names (capacity OOMs only).
    location:     where in the generated module the op a failing Mosaic pass named comes from; `mosaic_op` its
                  name, `failed_pass` the pass.
    vmem_limit_bytes / vmem_used_bytes: the scoped VMEM limit applied to the kernel and what it uses, from the
                  compiled HLO (max over the module's kernels); None when not compiled.
    vmem_operand_bytes: the kernel's operands XLA copied into VMEM before it (not in its scoped use).
    kernels:      the Mosaic dump of each kernel (texts empty when compiled with dump_mosaic=False).
    schedules:    (schedule workers) each kernel's scheduled bundles, loops and slot utilisation, the Mosaic
                  kernels' and any XLA op's around them (a transpose, a pad in the host code).
    custom_calls: the Mosaic kernels (`tpu_custom_call` instructions of the compiled HLO), in program order.
    cycles:       (schedule="cycles") kernel name -> simulated `estimated_cycles` (0: the simulator skipped it).
    seconds:      trace + lower + compile time in the worker; wall_seconds: the caller's round trip
                  (includes starting the worker on a first call).
    """

    ok: bool
    seconds: float
    chip: str
    stage: Stage
    kind: CompileKind | None = None
    error: str = ""
    key_line: str = ""
    exception_type: str = ""
    numbers: dict[str, int] = field(default_factory=dict)
    oom_limit: Literal["scoped", "capacity"] | None = None
    allocations: tuple[VmemAllocation, ...] = ()
    location: SourceLoc | None = None
    mosaic_op: str | None = None
    failed_pass: str | None = None
    vmem_limit_bytes: int | None = None
    vmem_used_bytes: int | None = None
    vmem_operand_bytes: int | None = None
    kernels: tuple[KernelDump, ...] = ()
    schedules: tuple[KernelSchedule, ...] = ()
    cycles: dict[str, int] = field(default_factory=dict)
    custom_calls: tuple[str, ...] = ()
    wall_seconds: float = 0.0

    @property
    def op_counts(self) -> dict[str, int]:
        """Op counts summed over the kernels."""
        total: dict[str, int] = {}
        for k in self.kernels:
            for op, n in k.op_counts.items():
                total[op] = total.get(op, 0) + n
        return total

    @property
    def categories(self) -> dict[str, int]:
        """Category counts summed over the kernels (see compiler.tpu.mosaic_dump)."""
        return {c: sum(k.categories.get(c, 0) for k in self.kernels) for c in CATEGORIES}

    @staticmethod
    def from_json(data: dict, wall_seconds: float = 0.0) -> TpuCompileResult:
        loc = data.get("location")
        return TpuCompileResult(
            ok=data["ok"],
            seconds=data["seconds"],
            chip=data["chip"],
            stage=data["stage"],
            kind=data.get("kind"),
            error=data.get("error", ""),
            key_line=data.get("key_line", ""),
            exception_type=data.get("exception_type", ""),
            numbers=dict(data.get("numbers", {})),
            oom_limit=data.get("oom_limit"),
            allocations=tuple(VmemAllocation(**a) for a in data.get("allocations", ())),
            location=SourceLoc(**loc) if loc else None,
            mosaic_op=data.get("mosaic_op"),
            failed_pass=data.get("failed_pass"),
            vmem_limit_bytes=data.get("vmem_limit_bytes"),
            vmem_used_bytes=data.get("vmem_used_bytes"),
            vmem_operand_bytes=data.get("vmem_operand_bytes"),
            kernels=tuple(KernelDump.from_json(k) for k in data.get("kernels", ())),
            schedules=tuple(KernelSchedule.from_json(k) for k in data.get("schedules", ())),
            cycles=dict(data.get("cycles", {})),
            custom_calls=tuple(data.get("custom_calls", ())),
            wall_seconds=wall_seconds,
        )

    def to_json(self, with_text: bool = False) -> dict:
        return {
            "ok": self.ok,
            "seconds": self.seconds,
            "wall_seconds": self.wall_seconds,
            "chip": self.chip,
            "stage": self.stage,
            "kind": self.kind,
            "error": self.error,
            "key_line": self.key_line,
            "exception_type": self.exception_type,
            "numbers": self.numbers,
            "oom_limit": self.oom_limit,
            "allocations": [a.to_json() for a in self.allocations],
            "location": self.location.to_json() if self.location else None,
            "mosaic_op": self.mosaic_op,
            "failed_pass": self.failed_pass,
            "vmem_limit_bytes": self.vmem_limit_bytes,
            "vmem_used_bytes": self.vmem_used_bytes,
            "vmem_operand_bytes": self.vmem_operand_bytes,
            "kernels": [k.to_json(with_text) for k in self.kernels],
            "schedules": [k.to_json() for k in self.schedules],
            "cycles": dict(self.cycles),
            "custom_calls": list(self.custom_calls),
        }


def _bytes(number: str, unit: str) -> int:
    return round(float(number) * _UNITS[unit])


def classify_compile_error(message: str, failed_pass: str | None = None) -> dict[str, Any]:
    """kind, key_line, numbers, oom_limit, allocations and failed_pass of a libtpu compile error message."""
    out: dict[str, Any] = {"kind": "other", "key_line": "", "failed_pass": failed_pass}
    lines = message.splitlines()
    for kind, pattern in _KIND_PATTERNS:
        line = next((ln.strip() for ln in lines if pattern.search(ln)), None)
        if line is not None:
            out |= {"kind": kind, "key_line": line}
            break
    else:
        if failed_pass in _LAYOUT_PASSES:
            out["kind"] = "vector_layout"
        out["key_line"] = next((ln.strip() for ln in lines if ln.strip()), "")
    out["oom_limit"] = None
    out["allocations"] = [
        _allocation(m.group(3), _bytes(m.group(1), m.group(2))) for m in _ALLOCATION.finditer(message)
    ]
    if m := _SCOPED_OOM.search(message) or _CAPACITY_OOM.search(message):
        out["oom_limit"] = "scoped" if m.re is _SCOPED_OOM else "capacity"
        values = [_bytes(m.group(i), m.group(i + 1)) for i in (1, 3, 5)]
        out["numbers"] = dict(zip(("requested_bytes", "limit_bytes", "exceeded_bytes"), values, strict=True))
    elif m := _SINGLE_OOM.search(message):  # one allocation alone is larger than VMEM (v4's wording)
        out["oom_limit"] = "capacity"
        out["numbers"] = {"requested_bytes": int(m.group(1)), "limit_bytes": int(m.group(2))}
        tag = _SINGLE_TAG.search(message)
        out["allocations"] = [_allocation(tag.group(1) if tag else "", int(m.group(1)))]
    return out


def _allocation(body: str, size_bytes: int) -> dict[str, Any]:
    tag = _TAG.search(body)
    operand = _OPERAND.search(body)
    window = _WINDOW.search(body)
    buffers = _BUFFERS.search(body)
    return {
        "size_bytes": size_bytes,
        "tag": tag.group(1).strip() if tag else body.strip(),
        "operand_kind": operand.group(1) if operand else None,
        "operand_index": int(operand.group(2)) if operand else None,
        "window": window.group(1) if window else None,
        "buffers": int(buffers.group(1)) if buffers else None,
    }


_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?(%[\w.-]+) = (\w+)\[([\d,]*)\]\{[^}]*\bS\(1\)")
_CALL_OPERANDS = re.compile(r"custom-call\(([^)]*)\)")
_ITEMSIZE = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4,
             "f64": 8, "s64": 8, "u64": 8}


def _in_vmem(hlo_text: str) -> dict[str, int]:
    """Bytes of each HLO value XLA placed in VMEM (layout memory space S(1)), by name: its elements, padded to
    (8 x 128) tiles of the last two dims, times the element size."""
    out = {}
    for line in hlo_text.splitlines():
        m = _INSTRUCTION.match(line)
        if m is None or m.group(2) not in _ITEMSIZE:
            continue
        dims = [int(d) for d in m.group(3).split(",") if d]
        if dims:
            dims[-1] = -(-dims[-1] // 128) * 128
        if len(dims) > 1:
            dims[-2] = -(-dims[-2] // 8) * 8
        n = 1
        for d in dims:
            n *= d
        out[m.group(1)] = n * _ITEMSIZE[m.group(2)]
    return out


def kernel_vmem(hlo_text: str) -> dict[str, int | None]:
    """Scoped VMEM limit and use of the compiled kernels, from the `tpu_custom_call` backend configs of the
    optimized HLO (`scoped_memory_configs` / `used_scoped_memory_configs`, memory space 1 = VMEM), and the bytes of
    the kernels' operands XLA copied into VMEM before them (`vmem_operand_bytes`: a small array, on v7x: the
    kernel then reads it in place, and its scoped use leaves it out; max over the kernels)."""
    limits, used, operands = [], [], []
    placed = _in_vmem(hlo_text) if "S(1)" in hlo_text else {}
    decoder = json.JSONDecoder()
    for line in hlo_text.splitlines():
        if 'custom_call_target="tpu_custom_call"' not in line or "backend_config=" not in line:
            continue
        call = _CALL_OPERANDS.search(line)
        names = [a.strip() for a in call.group(1).split(",")] if call else []
        own = _INSTRUCTION.match(line)  # the kernel's result, when XLA keeps it in VMEM too
        operands.append(sum(placed.get(a, 0) for a in names) + (placed.get(own.group(1), 0) if own else 0))
        config, _ = decoder.raw_decode(line, line.index("backend_config=") + len("backend_config="))
        limits += [
            int(c["size"]) for c in config.get("scoped_memory_configs", ()) if c.get("memory_space") == "1"
        ]
        used += [
            int(c["size"])
            for c in config.get("used_scoped_memory_configs", ())
            if c.get("memory_space") == "1"
        ]
    return {"vmem_limit_bytes": max(limits, default=None), "vmem_used_bytes": max(used, default=None),
            "vmem_operand_bytes": max(operands, default=None)}


def encode_arg(arg: Arg | dict) -> dict:
    """One argument as the worker reads it; a dict is one already encoded (a tensor as {"shape", "dtype"}:
    callers without jax, such as the tuner's gate, encode their own)."""
    if isinstance(arg, dict):
        return arg
    if isinstance(arg, list):
        return {"value": arg}  # a list argument is not static (unhashable); the generated code never reads it
    if isinstance(arg, int | float | tuple | str) or arg is None:
        return {"static": arg}
    if not hasattr(arg, "shape"):  # a dtype argument: static, and used by the compiler only
        return {"static": str(arg)}
    return {"shape": [int(d) for d in arg.shape], "dtype": np.dtype(arg.dtype).name}


class TpuCompiler:
    """A libtpu compile worker process (started on first use, restarted after a crash or timeout).

    schedule: also report the TPU compiler's schedule of each kernel ("bundles"), and its simulated cycles
    ("cycles": v5e, v5p and v6e only; other chips abort). memory_limit: the worker's address-space limit in
    bytes (None: unlimited). mosaic_dump=False: libtpu writes no Mosaic pass dumps, for a caller that wants
    only the verdict (the tuner's gate): results carry no kernel dumps (op counts, failing pass, the source
    location of a Mosaic error), and a compile costs less (attention 8k unrolled on v7x: libtpu writes 73 MB of
    dumps, 1.2-1.5 of its ~8 CPU-seconds)."""

    def __init__(
        self, timeout: float = 300.0, schedule: ScheduleMode | None = None, memory_limit: int | None = None,
        mosaic_dump: bool = True,
    ):
        self.timeout = timeout
        self.schedule = schedule
        self.memory_limit = memory_limit
        self.mosaic_dump = mosaic_dump
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._tmp: Path | None = None
        self._ready = False  # the running worker has said it is ready

    def start(self) -> None:
        """Start the worker now (jax import, ~1-2 s) instead of on the first compile."""
        with self._lock:
            self._ensure_started()

    def _ensure_started(self) -> subprocess.Popen:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        if not libtpu_available():
            raise LibtpuUnavailable("libtpu is not installed: the real TPU compile is unavailable")
        self._cleanup()
        self._tmp = Path(tempfile.mkdtemp(prefix="helion-libtpu-"))
        dump_dir = self._tmp / "dump"
        dump_dir.mkdir()
        env = lifeline.child_env()  # dies with this process, even if it is killed
        flags = ""
        if self.mosaic_dump:
            flags = f"--xla_mosaic_dump_to={dump_dir} --xla_mosaic_enable_dump_debug_info=true"
        if self.schedule is not None:
            llo = self._tmp / "llo"
            llo.mkdir()
            flags += f" --xla_jf_dump_to={llo} --xla_jf_dump_llo_pass_label_regex=final"
            env[SCHEDULE_DIR_ENV] = str(llo)
            if self.schedule == "cycles":
                profile = self._tmp / "profile"
                profile.mkdir()
                flags += f" --xla_jf_dump_static_llo_profile_to={profile}"
                env[PROFILE_DIR_ENV] = str(profile)
        if self.memory_limit is not None:
            env[MEMORY_LIMIT_ENV] = str(int(self.memory_limit))
        env.update(
            JAX_PLATFORMS="cpu",
            TPU_SKIP_MDS_QUERY="1",
            ALLOW_MULTIPLE_LIBTPU_LOAD="1",
            LIBTPU_INIT_ARGS=f"{env.get('LIBTPU_INIT_ARGS', '')} {flags}".strip(),
            PYTHONPATH=os.pathsep.join(p for p in (_REPO_ROOT, env.get("PYTHONPATH")) if p),
        )
        env[DUMP_DIR_ENV] = str(dump_dir)
        self._ready = False
        with open(self._tmp / "worker.log", "ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "compiler.tpu._libtpu_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=_REPO_ROOT,
                start_new_session=True,
            )
        return self._proc

    def compile(
        self,
        source: str,
        entry: str,
        arg_structs: Sequence[Arg],
        chip: Chip,
        dump_mosaic: bool = True,
        filename: str = "<generated>",
    ) -> TpuCompileResult:
        """Compile `entry(*arg_structs)` of the module `source` for `chip`. Raises LibtpuUnavailable only.

        Locations in the module are reported with `filename` as their file.
        """
        request = {
            "source": source,
            "entry": entry,
            "filename": filename,
            "args": [encode_arg(a) for a in arg_structs],
            "chip": chip.name,
            "dump": dump_mosaic,
        }
        with self._lock:
            proc = self._ensure_started()
            if not self._ready:
                started = time.perf_counter()
                if not self._await_ready(proc):
                    return self._failed(chip, time.perf_counter() - started, timed_out=proc.poll() is None,
                                        starting=True)
            start = time.perf_counter()
            (self._tmp / "worker.log").write_bytes(b"")
            try:
                proc.stdin.write((json.dumps(request) + "\n").encode())
                proc.stdin.flush()
            except BrokenPipeError:  # the worker died since the last compile
                return self._failed(chip, time.perf_counter() - start, timed_out=False)
            ready, _, _ = select.select([proc.stdout], [], [], self.timeout)
            line = proc.stdout.readline() if ready else b""
            wall = time.perf_counter() - start
            if line:
                return TpuCompileResult.from_json(json.loads(line), wall)
            return self._failed(chip, wall, timed_out=not ready)

    def _await_ready(self, proc: subprocess.Popen) -> bool:
        """Wait for a new worker's ready line: its imports are not part of the first compile's time limit."""
        ready, _, _ = select.select([proc.stdout], [], [], STARTUP_TIMEOUT)
        self._ready = bool(ready) and proc.stdout.readline().decode(errors="replace") == READY_LINE
        return self._ready

    def _failed(self, chip: Chip, wall: float, timed_out: bool, starting: bool = False) -> TpuCompileResult:
        """The worker timed out or died: kill it (the next compile starts a new one) and report."""
        self._kill()
        log = (self._tmp / "worker.log").read_text(errors="replace").strip().splitlines()
        tail = "\n".join(ln for ln in log[-15:] if ln.strip())
        if starting:
            kind = "timeout" if timed_out else "crash"
            message = (f"the libtpu worker did not finish importing jax and libtpu in {STARTUP_TIMEOUT:.0f} s"
                       if timed_out else f"the libtpu worker died while starting (exit code {self._proc.returncode})")
        elif timed_out:
            kind, message = (
                "timeout",
                f"libtpu compile took longer than {self.timeout:.0f} s; the worker was killed",
            )
        else:
            kind, message = "crash", f"the libtpu worker died (exit code {self._proc.returncode})"
            check = next((ln for ln in log if "Check failed" in ln or "LLO_CHECK" in ln), None)
            if check is not None:  # libtpu stopped itself: say where
                message += ": " + check.split("] ", 1)[-1].strip()[:300]
            elif self.memory_limit is not None:
                message += f" (its address space is limited to {self.memory_limit / 2**30:.1f} GiB)"
        return TpuCompileResult(
            ok=False,
            seconds=wall,
            chip=chip.name,
            stage="worker",
            kind=kind,
            error=f"{message}\n{tail}".strip(),
            key_line=message,
            wall_seconds=wall,
        )

    def interrupt(self) -> None:
        """Stop the compile running now, from another thread: the worker is killed, that compile's result is a
        crash, and the next compile starts a fresh worker. Nothing happens when the worker is not running."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGKILL)
        if self._proc is not None:
            self._proc.wait()

    def _cleanup(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def close(self) -> None:
        """Stop the worker and remove its files."""
        with self._lock:
            if self._proc is not None:
                if self._proc.poll() is None:
                    self._proc.stdin.close()
                    try:
                        self._proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        self._kill()
                self._proc = None
            self._cleanup()

    def __enter__(self) -> TpuCompiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_default: TpuCompiler | None = None
_default_lock = threading.Lock()


def default_compiler() -> TpuCompiler:
    """The process-wide shared worker (closed at exit)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = TpuCompiler()
            atexit.register(_default.close)
        return _default


def tpu_compile(
    source: str,
    entry: str,
    arg_structs: Sequence[Arg],
    chip: Chip,
    dump_mosaic: bool = True,
    filename: str = "<generated>",
) -> TpuCompileResult:
    """Deviceless libtpu compile of `entry` in the module text `source` on the shared worker.

    Raises LibtpuUnavailable when libtpu is not installed; every compile problem is a result, not an exception.
    """
    return default_compiler().compile(source, entry, arg_structs, chip, dump_mosaic, filename)
