"""One stage's remembered result for one unit, and its encoding: a pickle, compressed, read back only
through an unpickler that builds nothing but the compiler's own data classes and plain values."""

from __future__ import annotations

import dataclasses
import enum
import io
import pickle
import zlib
from typing import Any

from ..facts import BodyFacts, expression_facts
from ..ir.chips import Chip
from ..ir.config import Config
from ..ir.plan import KernelPlan
from ..support.diagnostics import Diagnostic, Range
from ..vmem.report import VmemReport
from .keys import UnitKey

STAGES = ("front", "lower", "tpu")  # front end + codegen + VMEM report; Mosaic lowering; libtpu compile


@dataclasses.dataclass(frozen=True)
class CompiledSnapshot:
    """What is kept of a `compiler.CompiledKernel`: plain results, no IR, no AST (cheap to keep by the
    hundred and to store)."""

    source: str  # the generated module
    source_map: tuple[tuple[int, Range], ...]
    config: Config
    chip: Chip
    plan: KernelPlan
    vmem: VmemReport
    facts: BodyFacts | None = None  # what each name, call and subscript of the body is (compiler/facts.py)

    @staticmethod
    def of(ck: Any) -> CompiledSnapshot:
        facts = expression_facts(ck) if ck.source else None  # emit=False compiles are never shown in an editor
        return CompiledSnapshot(ck.source, tuple(ck.source_map), ck.config, ck.chip, ck.plan, ck.vmem, facts)


@dataclasses.dataclass(frozen=True)
class StageRecord:
    """A stage's result for a unit; its ranges are in the coordinates of `basis`, the kernel's text
    (decorators to the end of its body) starting at zero-based line `basis_line` of the file it came from."""

    stage: str
    key: UnitKey
    diagnostics: tuple[Diagnostic, ...]
    basis: str
    basis_line: int
    compiled: CompiledSnapshot | None = None  # front stage only; None when the unit does not compile
    seconds: float = 0.0


class BadRecord(Exception):
    """Stored bytes that do not decode to a record (damaged, or written by something else)."""


def encode(record: StageRecord) -> bytes:
    return zlib.compress(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL), 1)


_BUILTINS = frozenset({"tuple", "list", "dict", "set", "frozenset", "int", "float", "bool", "str", "bytes",
                       "complex", "NoneType", "slice", "range"})


class _Unpickler(pickle.Unpickler):
    """Builds only the compiler's plain data classes (dataclasses, enums, Config) and builtin values:
    stored bytes can never call a function or construct anything else."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _BUILTINS:
            return super().find_class(module, name)
        if module == "compiler" or module.startswith("compiler."):
            found = super().find_class(module, name)
            if isinstance(found, type) and (dataclasses.is_dataclass(found) or issubclass(found, enum.Enum | Config)):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a stored record")


def decode(blob: bytes) -> StageRecord:
    try:
        record = _Unpickler(io.BytesIO(zlib.decompress(blob))).load()
    except Exception as exc:  # any damage: truncated, garbled, foreign
        raise BadRecord(f"{type(exc).__name__}: {exc}") from None
    if not isinstance(record, StageRecord):
        raise BadRecord(f"a {type(record).__name__}, not a StageRecord")
    return record
