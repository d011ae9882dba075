"""Print the plan and IR as a standalone Pallas module, with a source map back to the kernel.

The module imports only jax, jax.numpy, jax.lax (via jax), functools and Pallas; it has one device kernel
function per grid loop and one jitted host function named like the kernel. Every statement ends with a
comment naming the kernel source line it came from.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.tile_ir import KernelIR
from ..support.diagnostics import Range
from .chunks import HELPERS as CHUNK_HELPERS
from .emit_base import Output
from .emit_dma import HELPERS as DMA_HELPERS
from .emit_host import HostWriter
from .emit_index import HELPERS as INDEX_HELPERS
from .emit_kernel import KernelWriter
from .exprs import HELPERS
from .plan_builder import CallLayout


def emit_module(ir: KernelIR, layouts: list[CallLayout], config: dict, header: str,
                line_label: Callable[[int], str], mutated: list[str]) -> tuple[str, list[tuple[int, Range]]]:
    """The module text and its source map (0-based generated line -> kernel source range); `line_label` names
    a source line in the comments that point back to it (`file.py:12`)."""
    out = Output(line_label=line_label)
    body = Output(line_label=line_label)
    helpers: set[str] = set()
    kernel_kwargs: list[dict[str, str]] = []
    for layout in layouts:
        kw = KernelWriter(ir, layout, config, body).write()
        helpers |= kw.helpers
        kernel_kwargs.append(kw.kwargs)
        body.add(0, "")
        body.add(0, "")
    HostWriter(ir, layouts, body, kernel_kwargs, mutated).write()
    out.add(0, header)
    out.add(0, "import functools\n\nimport jax\nimport jax.numpy as jnp\nfrom jax.experimental import pallas as pl\n"
               "from jax.experimental.pallas import tpu as pltpu\n\n")
    for h in sorted(helpers):
        out.add(0, HELPERS.get(h) or INDEX_HELPERS.get(h) or CHUNK_HELPERS.get(h) or DMA_HELPERS[h])
        out.add(0, "")
    shift = len(out.lines)
    out.lines.extend(body.lines)
    out.source_map.extend((line + shift, rng) for line, rng in body.source_map)
    text = "\n".join(out.lines).rstrip() + "\n"
    return text, out.source_map
