"""A tiny built-in kernel compiled once at start-up, so the first real compile does not pay the imports.

Compiled by the compile and check workers (the server only parses it); imports only `compiler`.
"""

from __future__ import annotations

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
    for tile in hl.tile(out.size()):
        out[tile] = torch.exp(x[tile]) + 1.0
    return out
"""


def compile_warm_up(chip: str) -> Any:
    """The compiled warm-up kernel (a `compiler.CompiledKernel`), or None if it does not compile."""
    import compiler

    kernel = compiler.load(WARM_UP_SOURCE).kernels["warm_up"]
    try:
        return kernel.compile(chip=chip)
    except compiler.CompileError as exc:
        log.warning("warm-up compile failed: %s", exc)
        return None
