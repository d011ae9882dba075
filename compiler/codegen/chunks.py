"""How big a one-hot a gather or scatter builds at once, and the helper that writes a scatter a chunk at a time.

libtpu's compile time grows with the one-hot matrices `_gather` and `_scatter` (emit_index) hold at once: every
vreg of them is static code. What counts is the vregs, not the elements: a one-hot built at an index of shape
(128, 1, 1) is laid out in (8, 128) tiles whose 8 sublanes each hold one index row, 8 times its element count
(and the flattening reshape after it moves every one of those vregs). `one_hot_positions` is that padded count,
what `emit_index.gather_chunk` weighs a chunk of table rows by.

A scatter into a whole block (upstream jagged_layer_norm: 128 positions of a 33,280-element flat output) builds a
positions x rows one-hot twice (which rows are hit, and the old values at them): 4.3M elements, and libtpu 0.0.42
did not finish that kernel in 300 s. `_chunked_write` runs the same `_scatter` (or `_scatter_add`) over aligned
slices of the ref in a loop; a position outside a slice is past that slice's end, which writes nothing, so each
element is written by exactly the rows that write it at once (the same values, bit for bit).
May import what compiler.codegen may (emit_index for the chunk rule).
"""

from __future__ import annotations

import math

import torch

from .emit_index import LANES, gather_chunk

SUBLANES = 8  # rows of a 32-bit vreg: an index's last dim is padded to this many in the one-hot
# A scatter builds two one-hots (rows hit, old values) and selects through both, with the duplicate rule on top:
# libtpu 0.0.42 (v5e, CPU seconds of its worker) compiled upstream jagged_layer_norm's fori_loop strategy in
# 8.9 s with its scatter by 128-row chunks (128 positions: 2**14 elements), 37.5 s by 1,664-row ones (2**17.7),
# 3.7 s without the scatter: a scatter's element costs about what 16 of a gather's do.
SCATTER_WEIGHT = 16

HELPERS = {
    "chunked_write": (
        "def _chunked_write(write, ref, idx, values, chunk, valid=None):\n"
        '    """ref[...] = write(ref[...], idx, values, 0, valid) (`_scatter` or `_scatter_add` along the first dim), a\n'
        "    `chunk` of the rows at a time in a loop: the one-hot of a long block at once is code that grows with the\n"
        "    block, which the TPU compiler takes minutes over. A position outside the chunk is past its end there,\n"
        "    which writes nothing. `chunk` None (interpret mode): the whole block at once, no loop, the same values by\n"
        '    the writer\'s direct path."""\n'
        "    if chunk is None:\n"
        "        ref[...] = write(ref[...], idx, values, 0, valid, direct=True)\n"
        "        return\n"
        "    rows = ref.shape[0]\n"
        "    idx = jnp.where(idx < 0, idx + rows, idx)\n"
        "\n"
        "    def step(c, carry):\n"
        "        start = pl.multiple_of(c * chunk, chunk)\n"
        "        local = jnp.where((idx >= start) & (idx < start + chunk), idx - start, chunk)  # chunk: none here\n"
        "        ref[pl.ds(start, chunk)] = write(ref[pl.ds(start, chunk)], local, values, 0, valid)\n"
        "        return carry\n"
        "\n"
        "    jax.lax.fori_loop(0, rows // chunk, step, 0)\n"
    ),
}


def one_hot_positions(index_shape: tuple[int, ...]) -> int:
    """The index positions a one-hot built at `index_shape` takes room for: its last dim padded to whole
    sublanes (a 1-D index is one dim of rows too), times the dims before it."""
    if not index_shape:
        return 1
    *lead, last = index_shape
    return math.prod(lead) * (-(-last // SUBLANES) * SUBLANES)


def scatter_chunk(block: tuple[int, ...], positions: int, dtype: torch.dtype) -> int | None:
    """The rows `_chunked_write` takes at a time for a scatter of `positions` into a whole block of shape
    `block` along its first dim (None: all at once). The scatter's one-hot puts the positions on lanes (rows x
    positions), so they count in whole lane tiles, and each of its elements weighs SCATTER_WEIGHT of a gather's
    in the gather's rule."""
    return gather_chunk(block, -(-positions // LANES) * LANES * SCATTER_WEIGHT, dtype)

