"""A gather of many positions from a long table (upstream jagged_mean/jagged_sum at their tests' shapes: 2,048
positions of an 8,448-element flattened table) used to be one one-hot matmul of positions x rows elements, code
the TPU compiler took over 300 s on; it is now done a chunk of the table at a time in a loop
(`_gather_chunked`), bit for bit the same values, and libtpu compiles it in seconds."""

import time

import pytest
import torch
from test_checks_libtpu import libtpu

import compiler
from compiler.codegen.emit_index import ONE_HOT_ELEMENTS, gather_chunk

PICK = """import helion
import helion.language as hl
import torch


# helion: args(table=f32[16384], idx=i32[64, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def pick(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    out = torch.empty(idx.shape, dtype=table.dtype, device=idx.device)
    for t in hl.tile(idx.size(0)):
        out[t, :] = table[idx[t, :]]
    return out
"""


def _compiled(strategy: str, chip: str = "v5e"):
    kernel = compiler.load(PICK, "pick.py").kernels["pick"]
    return kernel.compile(config={"block_sizes": [8], "pallas_loop_type": strategy}, chip=chip)


def test_a_chunk_divides_the_table_and_bounds_the_one_hot():
    assert gather_chunk((1024,), 256, torch.float32) is None  # small: the whole table at once, as before
    assert gather_chunk((16384,), 1024, torch.float32) == 256  # 1024 x 256 = 2**18 elements a step
    assert gather_chunk((8448,), 2048, torch.float32) == 128  # jagged_mean's: as small as Mosaic slices
    assert gather_chunk((8448, 8), 256, torch.float32) == 768  # rows of a 2-D table: multiples of 8
    assert gather_chunk((8447,), 2048, torch.float32) is None  # no aligned divisor: the whole table
    for rows, positions in ((16384, 1024), (33280, 1024), (8448, 256)):
        chunk = gather_chunk((rows,), positions, torch.float32)
        assert rows % chunk == 0 and chunk % 128 == 0 and positions * chunk <= ONE_HOT_ELEMENTS


def test_a_long_gather_goes_by_chunks_and_gives_torchs_values():
    ck = _compiled("unroll")
    assert "_gather_chunked(table_ref, idx_ref[...], None if interpret else 256)" in ck.source, ck.source
    table = torch.randn(16384)
    table[5], table[6], table[16383] = float("inf"), float("nan"), float("-inf")
    idx = torch.randint(-16384, 16384, (64, 128), dtype=torch.int32)
    idx[0, :4] = torch.tensor([5, 6, -1, 16383], dtype=torch.int32)
    out, expected = ck(table, idx), table[idx.long()]
    assert torch.equal(out.isnan(), expected.isnan())
    assert torch.equal(torch.nan_to_num(out), torch.nan_to_num(expected))


@libtpu
@pytest.mark.parametrize("strategy", ["unroll", "fori_loop"])
def test_the_tpu_compiler_takes_a_long_gather_in_seconds(strategy):
    """With the whole table at once this one-hot is 1024 x 16384 elements a grid step (64x the bound)."""
    ck = _compiled(strategy)
    start = time.perf_counter()
    assert [d.message for d in ck.check_tpu_compile() if d.is_error or d.code == "HPL401"] == []
    assert time.perf_counter() - start < 120  # minutes before; seconds now, with room for a busy CI machine
