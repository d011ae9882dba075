"""Shapes from the module's own calls: the argument shapes each kernel is called with, found statically.

Upstream Helion files say which shapes they run — `main()` calls `check(4096, 2560)`, which builds
`x = torch.randn([m, n], device=DEVICE, dtype=HALF_DTYPE)` and passes it to the kernels through
`run_example` — but carry no `# helion: args(...)` line. `call_recorder.infer_call_shapes` follows that
code with the bounded abstract evaluation of host_eval.py (module-level code, `main()`,
`if __name__ == "__main__":`, same-file functions, lambdas, `functools.partial`, dicts of kernels, `for`
loops, autograd.Function `.apply` and `backward()`), never importing or running anything, and records each
kernel call whose arguments it knows. Each distinct set of arguments is a shape set, labelled with the call
in the entry code that led to it ("from `check(4096, 2560)` at line 201").

It works on a module text (source + parsed tree in `ModuleInfo`), whatever that text came from: a file,
an editor buffer or a notebook's cells joined in order. This module holds the results (`InferredShapes`):
they import no torch and pickle, so a process without torch (the language server) can have another one
compute them; the evaluation itself (call_recorder.py and the host_*.py modules it drives) needs torch and
imports this module, never the other way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.specs import ArgSpec
from ..support.diagnostics import Diagnostic, Range
from .unreached import Unreached


@dataclass(frozen=True)
class ShapeOrigin:
    """Where an inferred shape set comes from. `range` is the call in the entry code (main(), module
    level) that `label` names; `call` is the kernel call itself (or the helper call that made it)."""

    label: str
    range: Range
    call: Range
    notes: tuple[str, ...] = ()
    # a case of the file's input generator (generator_shapes.py): its key as written, a dict for vLLM's CaseKey
    # ({"hidden_size": 4096, "num_tokens": 128}) or the key's string for the older string keys; the key as a
    # label ("hidden_size=4096, num_tokens=128"); and the generator ("generate_inputs()"). None for a call.
    case_key: dict[str, Any] | str | None = field(default=None, hash=False, compare=False)
    case_label: str | None = None
    source: str | None = None
    # the values the case's integer tensors hold, as far as the evaluation follows them (host_bounds.py): name ->
    # (lowest, highest); `check` draws those arguments within them (a page table of page numbers, lengths that fit)
    int_bounds: tuple[tuple[str, int, int], ...] = field(default=(), hash=False, compare=False)


@dataclass
class InferredShapes:
    """Per kernel name, its shape sets in the order the code makes the calls."""

    sets: dict[str, list[tuple[dict[str, ArgSpec], ShapeOrigin]]] = field(default_factory=dict)
    misses: dict[str, list[tuple[Range, str]]] = field(default_factory=dict)  # calls whose arguments are not known
    unreached: dict[str, Unreached] = field(default_factory=dict)  # why the run never calls a kernel it names
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # why a kernel's input generator gave it no shape set at all: its one diagnostic, in place of HPL107's hint
    unshaped: dict[str, Diagnostic] = field(default_factory=dict)
    steps: int = 0
