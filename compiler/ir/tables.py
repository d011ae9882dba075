"""Integer tables a kernel reads as positions, and what their values must be for the kernel to mean anything.

A check runs a kernel on random inputs; an integer table the kernel reads as offsets, positions or loop
counts is only meaningful with values of that kind (a jagged layout's offsets must not decrease, a gathered
position must lie inside the gathered dim). The compiler decides each table's kind from how the kernel reads
it (compiler/frontend/table_roles.py); the eager reference's inputs (compiler/reference/inputs.py) draw the values.
This module is what both share: plain data, no torch, so a compiled plan that holds it unpickles anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TableKind = Literal["offsets", "positions", "counts"]
LEGACY_HIGH = 8  # counts whose bound nothing says are drawn in [1, 8]


@dataclass(frozen=True)
class IndexTable:
    """One integer tensor argument and the values it takes.

    offsets: non-decreasing from 0, the last entry at most `extent` (row i spans [t[i], t[i + 1]) of a dim of
    `extent` rows), each row at most `longest` long; positions: each in [0, extent); counts: each in [1, extent] (an empty loop is a loop over
    nothing: a one-row softmax over no keys compares NaN with NaN), or [1, 8] when `extent` is None (a count
    whose loop indexes nothing the compiler can see)."""

    name: str
    kind: TableKind
    extent: int | None = None
    longest: int | None = None  # offsets: the longest a row may be (a dense dim a loop over a row's length indexes)

    def describe(self) -> str:
        if self.kind == "offsets":
            rows = "" if self.longest is None else f", rows at most {self.longest} long"
            return f"{self.name} as offsets from 0 to at most {self.extent}{rows}" if self.extent is not None \
                else f"{self.name} as offsets from 0 (row lengths in [0, {LEGACY_HIGH}])"
        if self.kind == "positions":
            return f"{self.name} as positions in [0, {self.extent})"
        return f"{self.name} as counts in [1, {self.extent}]" if self.extent is not None \
            else f"{self.name} as counts in [1, {LEGACY_HIGH}]"

    @property
    def keeps_shapes(self) -> bool:
        """Must the kernel run at the sizes the table was decided for? Values bounded by an extent follow the
        shapes they are drawn for; [1, 8] may be block numbers only a large dim has."""
        return self.extent is None
