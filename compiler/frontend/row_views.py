"""1-D tensors tiled by small blocks: `labels[tile_n]` with 8-row tiles.

A rank-1 block must span its array, be a multiple of 1024 or be a power of two of at least 128 * (4 /
itemsize) (Mosaic), so a kernel that tiles rows of a wide 2-D tensor and a 1-D tensor with the same tile
(`logits[tile_n, :]` and `labels[tile_n]`, cross entropy at a 128k vocabulary) could not take fewer than 128
rows per step, however little VMEM that leaves. When the block divides the 1-D tensor and the tensor is small,
the access reads (or writes) row `tile_n.id` of the tensor's `[n / block, block]` view instead: the same
positions, a whole-array 2-D block that stays in VMEM for the call, one row per grid step (a dynamic index on
the sublane dim, which the TPU allows).

Likewise a launch-grid tile of one row on the second-to-last dim of a 2-D or larger tensor
(`hl.tile(tokens, block_size=1)`): a (1, m) block of [n, m] breaks Mosaic's (8, 128) rule, so the access reads
row `tile.id` of the `[..., n, 1, m]` view (`single_row_view`), block (squeezed, 1, m): the same positions and
the same value shape, a legal block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.tile_ir import TileDim, Value
from ..support.diagnostics import Range

if TYPE_CHECKING:
    from .tracer import Tracer

ROWS_BYTES = 1 << 20  # the view's VMEM (its rows padded to 128 lanes) at the smallest block
ROWS_MIN = 8  # blocks of a multiple of 8 positions (fewer would pad the view's rows further)


def rank1_legal(n: int, block: int, itemsize: int) -> bool:
    """May `block` positions be one rank-1 block of an array of `n`?"""
    if block >= n:
        return True
    power_of_two = block & (block - 1) == 0
    return block % 1024 == 0 or (power_of_two and block >= 128 * max(1, 4 // itemsize))


def fits_as_rows(n: int, itemsize: int) -> bool:
    """Is a 1-D tensor of `n` elements small enough to be kept whole as rows of 8 (padded to 128 lanes)?"""
    return -(-n // ROWS_MIN) * 128 * max(4, itemsize) <= ROWS_BYTES


def use_rows(n: int, block: int, itemsize: int) -> bool:
    """Read a 1-D tensor of `n` elements tiled by launch-grid blocks of `block` through its rows view?"""
    return (not rank1_legal(n, block, itemsize) and block % ROWS_MIN == 0 and n % block == 0
            and fits_as_rows(n, itemsize))


def single_row_view(t: Tracer, tensor: Value, items: tuple, rng: Range) -> tuple[Value, tuple]:
    """(view, items) reading a one-row launch-grid tile of the second-to-last dim through the [..., n, 1, m]
    view; (tensor, items) unchanged for any other access."""
    dims = [i for i, it in enumerate(items) if it[0] != "newaxis"]
    if len(dims) != len(tensor.shape) or len(dims) < 2:
        return tensor, items
    at = dims[-2]
    if items[at][0] != "tile" or tensor.shape[-2] == 1:
        return tensor, items
    d: TileDim = items[at][1]
    launch = t.loops[0].dims[0].loop_id if t.loops else None
    if d.block_size != 1 or d.block_index is not None or d.loop_id != launch or d.dynamic or d.begin \
            or d.parent is not None:
        return tensor, items
    shape = tuple(tensor.shape)
    view = t.host_view(tensor, shape[:-1] + (1,) + shape[-1:], "rows1", rng)
    return view, items[:at] + (("id", d), ("full",)) + items[at + 1:]
