"""Torch's meta kernels without importing torch._dynamo: about 1 s off a worker's first compile.

Many of torch's Python meta kernels (the `torch._refs` behind exp, mul, softmax, ... on "meta" tensors,
which is how ops.py types every operation) are wrapped by `torch._disable_dynamo`. On its first call
each such wrapper imports torch._dynamo (1-2 s of CPU, the largest single cost of a cold language
server) only to build a function that switches dynamo off for the call, and caches it in the attribute
`__dynamo_disable` of the function it wraps (torch/_compile.py, torch 2.13). In a process that never
runs torch.compile, dynamo is never on, so the function itself is an exact stand-in: `skip_dynamo_import`
stores it in that cache for every such wrapper reachable from torch's decomposition tables (which hold
the meta kernels; the refs they call are registered there too).

Meant for processes that only compile (the language server's compile and check workers): under
torch.compile these wrappers would no longer keep dynamo out of torch's internals. If torch changes the
wrapper, nothing is stored and the import simply happens as before.
"""

from __future__ import annotations

import types

_CACHE_ATTRIBUTE = "__dynamo_disable"  # what torch._compile._disable_dynamo's wrapper looks up


def skip_dynamo_import() -> int:
    """Pre-fill torch's disable-dynamo cache with the plain functions; returns how many were filled."""
    import torch
    import torch._decomp  # noqa: F401  (the tables; imported by torch itself already)

    wrapper_code = torch._disable_dynamo(_probe).__code__
    if "fn" not in wrapper_code.co_freevars:  # a torch whose wrapper we do not know: leave it alone
        return 0
    fn_cell = wrapper_code.co_freevars.index("fn")
    filled = 0
    for wrapper in _functions_reachable_from_tables(torch._decomp.global_decomposition_table):
        if wrapper.__code__ is wrapper_code:
            wrapped = wrapper.__closure__[fn_cell].cell_contents
            if getattr(wrapped, _CACHE_ATTRIBUTE, None) is None:
                setattr(wrapped, _CACHE_ATTRIBUTE, wrapped)
                filled += 1
    return filled


def _probe() -> None:
    """Only wrapped, never called: its wrapper's code object identifies torch's other wrappers."""


def _functions_reachable_from_tables(tables: dict) -> list[types.FunctionType]:
    """Every Python function in the tables, and those they wrap or close over (a few thousand, ~3 ms)."""
    seen: dict[int, types.FunctionType] = {}
    stack: list[object] = [fn for table in tables.values() for fn in table.values()]
    while stack:
        fn = stack.pop()
        if not isinstance(fn, types.FunctionType) or id(fn) in seen:
            continue
        seen[id(fn)] = fn
        stack.append(getattr(fn, "__wrapped__", None))
        for cell in fn.__closure__ or ():
            try:
                stack.append(cell.cell_contents)
            except ValueError:  # a cell not filled yet
                pass
    return list(seen.values())
