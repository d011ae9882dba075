"""What libtpu took minutes over in upstream jagged_layer_norm at its test's shapes (issue 41): a scatter of 128
positions into a whole 33,280-element output block was one 4.3M-element one-hot, and its gathers, indexed at
(128, 1, 1), built one-hots 8 times the size their element count said (one index row a sublane). A scatter into a
long block is now written a chunk of the block at a time (`_chunked_write`), with the same values, and a
gather's chunk is weighed by the vregs its one-hot takes."""

import time

import pytest
import torch
from test_checks_libtpu import libtpu

import compiler
from compiler.codegen.chunks import SCATTER_WEIGHT, one_hot_positions, scatter_chunk
from compiler.codegen.emit_index import ONE_HOT_ELEMENTS, gather_chunk

PUT = """import helion
import helion.language as hl
import torch


# helion: args(vals=f32[64, 128], idx=i32[64, 128], out=f32[16384])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[8]))
def put(vals: torch.Tensor, idx: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for t in hl.tile(idx.size(0)):
        out[idx[t, :]] = vals[t, :]
    return out
"""

# one position a row: what libtpu lowers (it rejects the (8, 128) -> (1024, 1) reshape of PUT's values either way)
PUT_ROWS = """import helion
import helion.language as hl
import torch


# helion: args(vals=f32[1024], idx=i32[1024], out=f32[32768])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128]))
def put_rows(vals: torch.Tensor, idx: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for t in hl.tile(idx.size(0)):
        out[idx[t]] = vals[t]
    return out
"""

ADD = PUT.replace("def put(", "def add(").replace("out[idx[t, :]] = vals[t, :]", "hl.atomic_add(out, [idx[t, :]], vals[t, :])")


def _compiled(source: str, name: str, strategy: str = "unroll", block: int = 8):
    kernel = compiler.load(source, f"{name}.py").kernels[name]
    return kernel.compile(config={"block_sizes": [block], "pallas_loop_type": strategy}, chip="v5e")


def test_a_one_hot_counts_its_index_rows_in_whole_sublanes():
    assert one_hot_positions((128,)) == 128
    assert one_hot_positions((8, 128)) == 1024  # dense: as many as its elements
    assert one_hot_positions((128, 1, 1)) == 1024  # one index row a sublane: 8x its 128 elements
    assert one_hot_positions((128, 1, 8)) == 1024
    # jagged_layer_norm's gathers of 33,280 rows: by elements 1,664 rows a step (1.7M padded); now 256
    assert gather_chunk((33280,), 128, torch.float32) == 1664
    assert gather_chunk((33280,), one_hot_positions((128, 1, 1)), torch.float32) == 256


def test_a_scatter_chunk_divides_the_block_and_bounds_the_one_hot():
    assert scatter_chunk((128,), 128, torch.float32) is None  # small: the whole block at once, as before
    assert scatter_chunk((33280,), 128, torch.float32) == 128  # jagged_layer_norm's output: 260 steps
    assert scatter_chunk((33280,), 100, torch.float32) == 128  # positions sit on lanes: 100 take 128
    assert scatter_chunk((33280, 8), 16, torch.float32) == 128  # rows of a 2-D block: multiples of 8
    for rows, positions in ((16384, 1024), (33280, 128), (8448, 256)):
        chunk = scatter_chunk((rows,), positions, torch.float32)
        assert rows % chunk == 0 and chunk % 128 == 0 and positions * chunk * SCATTER_WEIGHT <= max(
            ONE_HOT_ELEMENTS, positions * 128 * SCATTER_WEIGHT)  # the bound, or the smallest chunk Mosaic slices


@pytest.mark.parametrize("strategy", ["unroll", "fori_loop"])
def test_a_long_scatter_goes_by_chunks_and_gives_torchs_values(strategy):
    ck = _compiled(PUT, "put", strategy)
    assert "_chunked_write(_scatter, out_out_ref, idx_ref[...], vals_ref[...], None if interpret else 128)" in ck.source, ck.source
    vals = torch.randn(64, 128)
    vals[0, :3] = torch.tensor([float("inf"), float("nan"), float("-inf")])
    idx = torch.randperm(16384)[:8192].reshape(64, 128).to(torch.int32)
    idx[1] -= 16384  # the same positions counted from the end
    out = torch.randn(16384)
    got = ck(vals, idx, out.clone())
    expected = out.clone()
    expected[idx.long()] = vals
    got = got[-1] if isinstance(got, tuple) else got
    assert torch.equal(got.isnan(), expected.isnan())
    assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(expected))


def test_an_atomic_add_into_a_long_block_goes_by_chunks_and_sums_duplicates():
    ck = _compiled(ADD, "add")
    assert "_chunked_write(_scatter_add, out_out_ref, idx_ref[...], vals_ref[...], None if interpret else 128)" in ck.source, ck.source
    vals = torch.randint(-8, 8, (64, 128)).float()  # small integers: every sum exact in any order
    idx = torch.randint(-16384, 16384, (64, 128), dtype=torch.int32)  # duplicates, within and across steps
    out = torch.randint(-8, 8, (16384,)).float()
    got = ck(vals, idx, out.clone())
    got = got[-1] if isinstance(got, tuple) else got
    expected = out.clone().index_put_((idx.long().reshape(-1) % 16384,), vals.reshape(-1), accumulate=True)
    assert torch.equal(got, expected)


@libtpu
def test_the_tpu_compiler_takes_a_long_scatter_in_seconds():
    """All at once this scatter's one-hots are 128 x 32768 elements a grid step."""
    ck = _compiled(PUT_ROWS, "put_rows", "fori_loop", block=128)
    assert "_chunked_write(_scatter, out_out_ref, idx_ref[...], vals_ref[...], None if interpret else 128)" in ck.source, ck.source
    start = time.perf_counter()
    assert [d.message for d in ck.check_tpu_compile() if d.is_error or d.code == "HPL401"] == []
    assert time.perf_counter() - start < 120  # seconds, with room for a busy CI machine


PUT_ROWS_2D = """import helion
import helion.language as hl
import torch


# helion: args(vals=f32[256, 128], idx=i32[256], out=f32[4096, 128])
@helion.kernel(static_shapes=True, config=helion.Config(block_sizes=[128]))
def put_2d(vals: torch.Tensor, idx: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for t in hl.tile(idx.size(0)):
        out[idx[t], :] = vals[t, :]
    return out
"""


def test_whole_rows_scattered_into_a_long_2d_block_go_by_chunks_of_rows():
    ck = _compiled(PUT_ROWS_2D, "put_2d", "fori_loop", block=128)
    assert "_chunked_write(_scatter, out_out_ref, idx_ref[...], vals_ref[...], None if interpret else 128)" in ck.source, ck.source
    vals, out = torch.randn(256, 128), torch.randn(4096, 128)
    idx = torch.randperm(4096)[:256].to(torch.int32)
    idx[:8] -= 4096  # the same rows counted from the end
    got = ck(vals, idx, out.clone())
    got = got[-1] if isinstance(got, tuple) else got
    expected = out.clone()
    expected[idx.long()] = vals
    assert torch.equal(got, expected)
