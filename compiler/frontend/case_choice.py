"""Which of an input generator's cases stand for all of them in the editor (torch-free: the language server
imports it): the smallest, the largest and evenly spaced ones between, by the elements of their tensors."""

from __future__ import annotations

import math

from ..ir.specs import ArgSpec


def representative(sets: list[dict[str, ArgSpec]], count: int = 3) -> list[int]:
    """Indices of `count` of `sets` (all when there are no more), in their order."""
    if len(sets) <= count:
        return list(range(len(sets)))
    sizes = sorted(range(len(sets)), key=lambda i: (_elements(sets[i]), i))
    picks = {sizes[0], sizes[-1]}
    for j in range(1, count - 1):
        picks.add(sizes[round(j * (len(sizes) - 1) / (count - 1))])
    return sorted(picks)


def _elements(specs: dict[str, ArgSpec]) -> int:
    total = 0
    for spec in specs.values():
        shape = getattr(spec, "shape", None)
        if shape is not None:
            total += math.prod(shape)
    return total
