"""A tiny built-in kernel compiled once at start-up, so the first real compile does not pay the imports.

It has a matmul, a reduction-free elementwise tail and a store, which import most of the front end and
codegen on first use: paid while the server itself is still importing, not after the open. (Those
operations are typed without torch's meta kernels, compiler/frontend/fast_types.py, so the warm-up no
longer imports sympy; a kernel using an operation outside them pays that ~0.2 s on its first compile.)

Compiled by the compile and check workers; the server parses it before it starts serving (`parse_warm_up`).
Imports only `compiler`.
"""

from __future__ import annotations

import gc
import logging
from typing import Any

log = logging.getLogger(__name__)

WARM_UP_SOURCE = """
import helion
import helion.language as hl
import torch


# helion: args(x=f32[256, 256])
@helion.kernel(static_shapes=True)
def warm_up(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile_m, tile_n in hl.tile(out.size()):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(x.size(1)):
            acc = torch.addmm(acc, x[tile_m, tile_k], x[tile_k, tile_n])
        out[tile_m, tile_n] = torch.exp(acc) + 1.0
    return out
"""


GC_THRESHOLDS = (20_000, 20, 100)  # rarer full collections: each one stops the event loop for its duration


def parse_warm_up() -> None:
    """The server's warm-up, before it serves: import and exercise the parser (compiles happen in the
    compile workers), then exclude everything alive from garbage collection.

    Imports hold the interpreter for seconds, so they must not overlap with serving requests; and torch
    brings millions of long-lived objects, so a full collection scanning them stopped the event loop for
    ~0.7 s. Frozen objects are still freed by reference counting.
    """
    import compiler

    compiler.load(WARM_UP_SOURCE)
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def compile_warm_up(chip: str) -> Any:
    """The compiled warm-up kernel (a `compiler.CompiledKernel`), or None if it does not compile.

    Only the workers call this, and they compile but never run torch.compile: so torch._dynamo, which
    torch's meta kernels would otherwise import on their first call, is skipped (~1 s of a cold start).
    """
    import compiler

    compiler.skip_dynamo_import()
    kernel = compiler.load(WARM_UP_SOURCE).kernels["warm_up"]
    try:
        return kernel.compile(chip=chip)
    except compiler.CompileError as exc:
        log.warning("warm-up compile failed: %s", exc)
        return None
