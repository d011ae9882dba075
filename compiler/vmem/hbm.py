"""HBM: the arrays a kernel's calls read and write, against what the chip's HBM holds.

A shape set whose arrays alone do not fit cannot run on that chip whatever the config: attention
[8, 32, 32768, 256] bf16 has q, k, v and its output at 4 GiB each, and libtpu gives a v5e 15.75 GiB. Said once
at compile (HPL303), on the shape set's line, instead of by every config the tuner would hand the TPU compiler.
"""

from __future__ import annotations

import math

from ..ir.chips import Chip, GiB
from ..ir.tile_ir import KernelIR
from ..support.diagnostics import Diagnostic, Range, error


def array_bytes(ir: KernelIR) -> dict[str, int]:
    """Bytes of each argument and allocation the kernel's device code reads or writes (a view counts as what it
    views). Tensors the host code derives are left out: a reshape (attention's q_flat) takes no HBM of its own,
    and what XLA does materialise is not counted, so the sum never exceeds what the chip needs."""
    out: dict[str, int] = {}
    for t in ir.tensors:
        root = t.root
        if root.origin not in ("arg", "alloc"):
            continue
        meta = root.value.meta
        out[root.name] = math.prod(int(d) for d in meta.shape) * meta.dtype.itemsize
    return out


def hbm_diagnostics(ir: KernelIR, chip: Chip, where: Range) -> list[Diagnostic]:
    """HPL303 when the arrays take more than the chip's HBM; `where` is the shape set's line."""
    arrays = array_bytes(ir)
    total = sum(arrays.values())
    if total <= chip.hbm_capacity_bytes:
        return []
    largest = sorted(arrays.items(), key=lambda kv: -kv[1])[:4]
    names = ", ".join(f"{name} {size / GiB:.2f} GiB" for name, size in largest)
    return [error("HPL303", f"these shapes do not fit {chip.name}'s HBM: the kernel's arrays take {total / GiB:.2f} GiB "
                            f"and the TPU compiler gives a kernel {chip.hbm_capacity_bytes / GiB:.2f} GiB ({names}); "
                            "no config changes that: smaller shapes, or a chip with more HBM",
                  where, data={"hbm_bytes": total, "hbm_capacity_bytes": chip.hbm_capacity_bytes})]
