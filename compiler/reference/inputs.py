"""Random kernel inputs from argument specs, shared by tests and correctness checks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from compiler.ir.callables import runtime_value
from compiler.ir.specs import ArgSpec, TensorSpec
from compiler.ir.tables import LEGACY_HIGH, IndexTable

POSITIVE_BY_NAME = frozenset({"rstd"})  # inverse standard deviations: the kernels divide by / scale with them


def _tensor(spec: TensorSpec, gen: torch.Generator, positive: bool) -> torch.Tensor:
    dtype = spec.dtype
    if dtype == torch.bool:
        return torch.randint(0, 2, spec.shape, generator=gen).bool()
    if dtype.is_floating_point:
        values = torch.randn(spec.shape, generator=gen, dtype=torch.float32)
        if positive:
            values = values.abs() + 0.5
        return values.to(dtype)
    low = 1 if positive or not dtype.is_signed else -8
    return torch.randint(low, 9, spec.shape, generator=gen, dtype=torch.int64).to(dtype)


def _ints(low: int, high: int, shape: Any, gen: torch.Generator) -> torch.Tensor:
    """Uniform in [low, high] (both included)."""
    return torch.randint(low, high + 1, shape, generator=gen, dtype=torch.int64)


def _offsets(rows: int, table: IndexTable, top: int, gen: torch.Generator) -> torch.Tensor:
    """A jagged layout of `rows` rows: 0 first, never decreasing. Rows bounded by a dense dim (`longest`) are
    each up to min(longest, extent // rows) long; other rows cut [0, extent] at random places, so the last
    entry is the extent (the data tensor's length is the last offset, as in every real layout: a row past it
    is written by nothing, and the file's own reference() would see 0 there), and so do rows bounded by a
    dense dim when there are more rows than elements."""
    if rows <= 0:
        return torch.zeros(max(rows + 1, 0), dtype=torch.int64)
    if table.extent is None:
        return torch.cat([torch.zeros(1, dtype=torch.int64), _ints(0, LEGACY_HIGH, (rows,), gen).cumsum(0)])
    extent = min(table.extent, top)
    if table.longest is not None and extent // rows:
        lengths = _ints(0, min(table.longest, extent // rows), (rows,), gen)
    else:
        cuts = _ints(0, extent, (rows - 1,), gen).sort().values
        lengths = torch.cat([cuts, torch.tensor([extent])]).diff(prepend=torch.zeros(1, dtype=torch.int64))
        if table.longest is not None:
            lengths = lengths.clamp(max=table.longest)
    return torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])


def _table(spec: TensorSpec, table: IndexTable, gen: torch.Generator) -> torch.Tensor:
    """Values of the kind `table` says (compiler/ir/tables.py), within what the dtype holds."""
    top = torch.iinfo(spec.dtype).max
    extent = None if table.extent is None else min(table.extent, top)
    if table.kind == "offsets" and len(spec.shape) == 1:
        values = _offsets(spec.shape[0] - 1, table, top, gen)
    elif table.kind == "positions" and extent is not None:
        values = _ints(0, max(extent - 1, 0), spec.shape, gen)
    elif extent is not None:
        values = _ints(min(1, extent), extent, spec.shape, gen)
    else:
        values = _ints(1, LEGACY_HIGH, spec.shape, gen)
    return values.to(spec.dtype)


def make_inputs(specs: dict[str, ArgSpec], seed: int = 0, positive: Iterable[str] = (),
                tables: Iterable[IndexTable] = (), ranges: Mapping[str, tuple[int, int]] | None = None) -> list[Any]:
    """One value per spec in order: random normal floats, small random ints, scalars as given.

    Tensors named `rstd` or listed in `positive` are drawn positive (floats `abs() + 0.5`, ints in [1, 8]).
    Integer tables the kernel reads as offsets, positions or loop counts (`tables`, see
    CompiledKernel.tables) are drawn as such, within the extents the compiler found for them. `ranges`: integer
    tensors whose values the kernel's own input generator bounds (a page table of page numbers, lengths that fit
    the pages), drawn within them instead: a jagged layout's offsets keep their drawing (their order matters)."""
    gen = torch.Generator().manual_seed(seed)
    wanted = POSITIVE_BY_NAME | set(positive)
    kinds = {t.name: t for t in tables}
    ranges = ranges or {}
    out = []
    for name, spec in specs.items():
        if not isinstance(spec, TensorSpec):
            out.append(runtime_value(spec))
        elif (name in ranges and not spec.dtype.is_floating_point and spec.dtype != torch.bool
              and (name not in kinds or kinds[name].kind != "offsets")):
            lo, hi = ranges[name]
            out.append(_ints(lo, hi, spec.shape, gen).to(spec.dtype))
        elif name in kinds and not spec.dtype.is_floating_point and spec.dtype != torch.bool:
            out.append(_laid_out(spec, _table(spec, kinds[name], gen)))
        else:
            out.append(_laid_out(spec, _tensor(spec, gen, name in wanted)))
    return out


def _laid_out(spec: TensorSpec, values: torch.Tensor) -> torch.Tensor:
    """`values` with the strides `spec` gives (`b.t()`, `empty_strided`), as the kernel's caller passes them:
    the kernel's host code, the file's reference and its baseline see the layout, not just the values."""
    if spec.strides is None:
        return values
    out = torch.empty_strided(spec.shape, spec.strides, dtype=values.dtype)
    return out.copy_(values)


@dataclass(frozen=True)
class Drawn:
    """The arguments of `make_inputs(specs, seed, positive, tables)`, picklable: a process that is sent this
    draws the very values its sender drew from it (a seeded CPU generator) without the tensors crossing a
    pipe."""

    specs: dict[str, ArgSpec]
    seed: int = 0
    positive: tuple[str, ...] = ()
    tables: tuple[IndexTable, ...] = ()

    def values(self) -> list[Any]:
        return make_inputs(self.specs, self.seed, self.positive, self.tables)
