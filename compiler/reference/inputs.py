"""Random kernel inputs from argument specs, shared by tests and correctness checks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from compiler.specs import ArgSpec, TensorSpec, runtime_value

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


def make_inputs(specs: dict[str, ArgSpec], seed: int = 0, positive: Iterable[str] = ()) -> list[Any]:
    """One value per spec in order: random normal floats, small random ints, scalars as given.

    Tensors named `rstd` or listed in `positive` are drawn positive (floats `abs() + 0.5`, ints in [1, 8]:
    counts, offsets and positions a kernel reads as loop bounds, see CompiledKernel.index_tables)."""
    gen = torch.Generator().manual_seed(seed)
    wanted = POSITIVE_BY_NAME | set(positive)
    return [
        _tensor(spec, gen, name in wanted) if isinstance(spec, TensorSpec) else runtime_value(spec)
        for name, spec in specs.items()
    ]


@dataclass(frozen=True)
class Drawn:
    """The arguments of `make_inputs(specs, seed, positive)`, picklable: a process that is sent this draws
    the very values its sender drew from it (a seeded CPU generator) without the tensors crossing a pipe."""

    specs: dict[str, ArgSpec]
    seed: int = 0
    positive: tuple[str, ...] = ()

    def values(self) -> list[Any]:
        return make_inputs(self.specs, self.seed, self.positive)
