"""Make jax on a CPU-only machine believe it is lowering for a chosen TPU.

Pallas TPU lowering asks `tpu_info.get_device_kind()` which chip it targets (tiling, rank-1 block rules,
`emit_pipeline`, `get_tpu_info`). Under an abstract mesh whose abstract device is a TPU, that answer comes
from the mesh instead of the default (CPU) device. One TensorCore per device, as a Pallas kernel sees it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import jax

from compiler.ir.chips import Chip


@contextmanager
def tpu_abstract_mesh(chip: Chip) -> Iterator[jax.sharding.AbstractMesh]:
    """Within the block, Pallas lowers and interprets as if running on `chip` (device_kind, 1 core)."""
    device = jax.sharding.AbstractDevice(device_kind=chip.device_kind, num_cores=1, platform="tpu")
    mesh = jax.sharding.AbstractMesh((), (), abstract_device=device)
    with jax.sharding.use_abstract_mesh(mesh):
        yield mesh
