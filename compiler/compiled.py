"""The result of compiling a kernel for one shape set, config and chip (`Kernel.compile`): the generated
module text, its source map, plan and VMEM report; call it, check it (Mosaic lowering, libtpu), write it
as JSON. Its own module because everything that consumes a compile (the tuner, the checks, the CLI, the
language server's workers) needs the result without the machinery that made it (compiler/pipeline.py).
Imports no torch (running it and its checks import jax and torch when called).
"""

from __future__ import annotations

import logging
import traceback
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any, Protocol

from .ir.specs import ArgSpec, TensorSpec, format_args
from .ir.tables import IndexTable
from .support.diagnostics import Diagnostic, Range, internal_error

if TYPE_CHECKING:
    from .frontend.module import KernelDef
    from .ir.chips import Chip
    from .ir.config import Config
    from .ir.plan import KernelPlan
    from .vmem.report import VmemReport

log = logging.getLogger(__name__)


class CompiledFrom(Protocol):
    """What a compile keeps of its kernel (api.Kernel is one): a protocol, so that the result does not name
    the public face that makes it (api -> pipeline -> compiled imports one way, also at type level)."""

    name: str
    definition: KernelDef


class CompiledKernel:
    """A kernel compiled for one shape set, config and chip: generated source, plan, VMEM report, runner."""

    def __init__(self, kernel: CompiledFrom, args: dict[str, ArgSpec], config: Config, chip: Chip, source: str,
                 source_map: list[tuple[int, Range]], plan: KernelPlan, vmem: VmemReport,
                 diagnostics: list[Diagnostic], mutated: list[str]):
        self.kernel = kernel
        self.args = args
        self.config = config
        self.chip = chip
        self.source = source
        self.source_map = source_map
        self.plan = plan
        self.vmem = vmem
        self.diagnostics = diagnostics
        self.mutated = mutated
        self.entry = kernel.name
        self.truth: dict[str, Any] = {}  # stage -> compiler.tpu.truth.TruthResult, filled by the check_* methods
        self._fn = None

    def __repr__(self) -> str:
        return f"<CompiledKernel {self.kernel.name} {format_args(self.args)} {self.config} on {self.chip.name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call it as the kernel is called: positional or keyword arguments, defaulted ones left out."""
        from .tpu.runtime import bind_call, load_entry, run

        if not self.source:
            raise RuntimeError(f"{self!r} was compiled with emit=False: it has no code to run")
        if self._fn is None:
            self._fn = load_entry(self.source, self.entry, f"<pallas {self.kernel.name}>")
        params, specs, values = bind_call(self.kernel.definition.node, self.args, args, kwargs)
        return run(self._fn, params, specs, self.chip, values, self.mutated)

    def arg_structs(self) -> list[Any]:
        """jax.ShapeDtypeStructs of the tensor arguments (for lowering / compiling without data)."""
        import jax
        import jax.numpy as jnp

        out = []
        for spec in self.call_specs.values():
            if isinstance(spec, TensorSpec):  # int64 arguments are passed as int32 (runtime.to_jax)
                dtype = jnp.int32 if spec.dtype_name == "int64" else jnp.dtype(spec.dtype_name)
                out.append(jax.ShapeDtypeStruct(spec.shape, dtype))
        return out

    def compile_args(self) -> list[Any]:
        """What the generated entry is compiled with: the tensors' ShapeDtypeStructs, then the scalar
        arguments' values (static)."""
        return self.arg_structs() + list(self.scalar_args().values())

    def check_lowering(self) -> list[Diagnostic]:
        """Mosaic lowering for the chip (always available); diagnostics on the kernel source."""
        from .tpu.truth import check_lowering

        return self._guarded(check_lowering, "lowering").diagnostics

    def check_tpu_compile(self, compiler: Any = None) -> list[Diagnostic]:
        """The real libtpu compile (one HPL402 info diagnostic when libtpu is absent); `compiler`: a TpuCompiler
        of its own (its time limit), else the shared one's."""
        from .tpu.truth import check_tpu_compile

        return self._guarded(partial(check_tpu_compile, compiler=compiler), "libtpu").diagnostics

    def _guarded(self, check: Any, stage: str) -> Any:
        from .tpu.truth import TruthResult

        try:
            result = check(self)
        except Exception as exc:  # noqa: BLE001 - a checker bug is one diagnostic, never a crash
            log.error("internal error in the %s check of %s:\n%s", stage, self.kernel.name, traceback.format_exc())
            result = TruthResult(False, [internal_error(self.plan.calls[0].range, exc)])
        self.truth[stage] = result
        return result

    def scalar_args(self) -> dict[str, Any]:
        """The generated function's non-tensor arguments (defaulted ones included), in its order."""
        return {n: v for n, v in self.call_specs.items() if not isinstance(v, TensorSpec)}

    @cached_property
    def tables(self) -> tuple[IndexTable, ...]:
        """Integer tensor arguments the kernel reads as offsets, positions or loop counts, and the values each
        takes (compiler/frontend/table_roles.py decides from the kernel's use of them). A check draws them as such: a
        random negative length or a position past the gathered dim means nothing to such a kernel. A table
        read one element at a time on the scalar core (in SMEM) whose use says nothing more counts loops."""
        found = {t.name: t for t in self.plan.tables}
        smem = {o.tensor for c in self.plan.calls for o in c.operands if o.memory == "smem" and o.kind == "input"}
        return tuple(found.get(n) or IndexTable(n, "counts") for n, s in self.args.items()
                     if n in found or (n in smem and isinstance(s, TensorSpec) and s.dtype_name.startswith(("int", "uint"))))

    @cached_property
    def call_specs(self) -> dict[str, ArgSpec]:
        """Spec of each parameter the generated function takes (a defaulted one: its default)."""
        from .tpu.runtime import bind_call

        params, specs, _ = bind_call(self.kernel.definition.node, self.args, [], {}, compiled_only=True)
        return {p: specs[p] for p in params}

    def to_json(self) -> dict:
        return {
            "kernel": self.kernel.name,
            "args": format_args(self.args),
            "chip": self.chip.name,
            "config": dict(self.config),
            "config_text": repr(self.config),
            "source": self.source,
            "source_map": [{"line": line, "range": rng.to_json()} for line, rng in self.source_map],
            "vmem": self.vmem.to_json(),
            "diagnostics": [d.to_json() for d in self.diagnostics],
        }
