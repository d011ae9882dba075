"""Tensors a kernel writes and also reads: read-modify-write across grid steps (K on the launch grid, in-place
row updates), outputs only partly written, buffers written by several grid loops, clones and views taken
before a write. Each kernel matches plain torch (values and in-place effects) or is diagnosed (HPL204)."""

import pytest
import torch
from torch_check import STRATEGIES, assert_matches_torch, compile_for

from compiler import CompileError
from compiler.tpu.libtpu_compile import libtpu_available

torch.manual_seed(0)


def _rows_plus_index(x):
    for r in range(x.shape[0]):
        x[r] += r + 10
    return x


def test_row_update_over_hl_grid_in_place():
    ck = assert_matches_torch("""
        @helion.kernel()
        def bump_rows(x: torch.Tensor) -> torch.Tensor:
            for row in hl.grid(x.size(0)):
                x[row, :] = x[row, :] + (row + 10)
            return x
    """, [torch.randn(4, 128)], _rows_plus_index)
    assert "@pl.when(row == 0)" in ck.source  # the whole-array block is copied in once, not every step
    assert not ck.check_lowering()


def test_one_dim_hl_grid_in_place():
    ck = assert_matches_torch("""
        @helion.kernel()
        def inc(x: torch.Tensor) -> torch.Tensor:
            for i in hl.grid(x.size(0)):
                x[i] = x[i] + 1
            return x
    """, [torch.arange(16.0)], lambda x: x.add_(1))
    assert not ck.check_lowering()  # TPUs cannot store a scalar to VMEM: the lane is merged into its row


def test_point_store_into_zeros_keeps_the_zeros():
    def torch_fn(x):
        out = torch.zeros_like(x)
        out[5, 77] = x[5, 77]
        return out

    ck = assert_matches_torch("""
        @helion.kernel()
        def one_point(x: torch.Tensor) -> torch.Tensor:
            out = torch.zeros_like(x)
            for _ in hl.tile(x.size(), block_size=[16, 128]):
                out[5, 77] = x[5, 77]
            return out
    """, [torch.randn(16, 128)], torch_fn)
    assert "one lane of the row" in ck.source and not ck.check_lowering()


def test_constant_index_stores_share_one_block():
    assert_matches_torch("""
        @helion.kernel()
        def copy_four(x: torch.Tensor) -> torch.Tensor:
            out = torch.zeros_like(x)
            for _ in hl.tile(x.size(0), block_size=4):
                out[0] = x[0]
                out[1] = x[1] * 2
                out[3] = x[3] + out[1]
            return out
    """, [torch.arange(1.0, 5.0)], lambda x: torch.stack([x[0], x[1] * 2, x[2] * 0, x[3] + x[1] * 2]))


KGRID = """
    @helion.kernel(dot_precision="ieee")  # f32 to within rounding: the test is of the loop structure
    def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.size()
        _, n = b.size()
        out = torch.zeros([m, n], dtype=torch.float32, device=a.device)
        for tm, tn, tk in hl.tile([m, n, k]):
            out[tm, tn] = out[tm, tn] + a[tm, tk] @ b[tk, tn]
        return out
"""


def test_k_on_the_launch_grid_accumulates_in_the_resident_block():
    a, b = torch.randn(128, 512), torch.randn(512, 256)
    ck = assert_matches_torch(KGRID, [a, b], lambda a, b: a @ b, {"block_sizes": [128, 128, 128]}, rtol=1e-4, atol=1e-4)
    call = ck.plan.calls[0]
    assert call.dimension_semantics == ("parallel", "parallel", "arbitrary")
    assert "input_output_aliases={0: 0}" in ck.source and "@pl.when(tk == 0)" in ck.source
    out = next(o for o in call.operands if o.tensor == "out")
    assert out.kind == "inout" and out.reads_old
    row = next(r for r in ck.vmem.rows if r.name == "out")
    assert row.buffer_count == 4 and "read back" in row.role  # old block in + new block out, double-buffered
    assert not ck.check_lowering()


def test_k_on_the_launch_grid_with_augmented_store():
    assert_matches_torch(KGRID.replace("out[tm, tn] = out[tm, tn] + a", "out[tm, tn] += a"),
                         [torch.randn(64, 256), torch.randn(256, 128)], lambda a, b: a @ b,
                         {"block_sizes": [64, 128, 128]}, rtol=1e-4, atol=1e-4)


def test_k_outside_the_output_dims_runs_innermost_unless_pinned():
    # written first, K still runs innermost on the launch grid: out's block visits stay consecutive
    source = KGRID.replace("tm, tn, tk in hl.tile([m, n, k])", "tk, tm, tn in hl.tile([k, m, n])")
    ck = assert_matches_torch(source, [torch.randn(128, 256), torch.randn(256, 256)], lambda a, b: a @ b,
                              {"block_sizes": [128, 128, 128]}, rtol=1e-4, atol=1e-4)
    assert "lambda tm, tn, tk:" in ck.source
    with pytest.raises(CompileError) as info:  # an explicit loop order the pipeline cannot keep is diagnosed
        compile_for(source, [torch.randn(128, 256), torch.randn(256, 256)],
                    {"block_sizes": [128, 128, 128], "loop_orders": [[0, 1, 2]]})
    d = info.value.diagnostics[0]
    assert d.code == "HPL204" and "`tk`" in d.message and "loop_orders" in d.message
    assert d.range.start.line == 11  # the read-modify-write line


def test_parallel_axes_form_a_prefix_of_the_grid():
    # out's block does not depend on the middle axis: it and every later axis must be "arbitrary"
    ck = assert_matches_torch("""
        @helion.kernel()
        def first_plane(x: torch.Tensor) -> torch.Tensor:
            a, b, c = x.size()
            out = torch.empty([a, c], dtype=x.dtype, device=x.device)
            for ta, tb, tc in hl.tile([a, b, c], block_size=[8, 1, 128]):
                out[ta, tc] = x[ta, 0, tc] * 2
            return out
    """, [torch.randn(16, 2, 128)], lambda x: x[:, 0, :] * 2)
    assert ck.plan.calls[0].dimension_semantics == ("parallel", "arbitrary", "arbitrary")


def test_output_block_revisited_out_of_order_is_diagnosed():
    source = """
        @helion.kernel()
        def first_plane(x: torch.Tensor) -> torch.Tensor:
            a, b, c = x.size()
            out = torch.empty([a, c], dtype=x.dtype, device=x.device)
            for ta, tb, tc in hl.tile([a, b, c], block_size=[8, 1, 128]):
                out[ta, tc] = x[ta, 0, tc] * 2
            return out
    """
    # left to itself the launch grid runs `tb` innermost, so out's block visits are consecutive
    ck = assert_matches_torch(source, [torch.randn(8, 2, 256)], lambda x: x[:, 0, :] * 2)
    assert "lambda ta, tc, tb:" in ck.source
    with pytest.raises(CompileError) as info:
        compile_for(source, [torch.randn(8, 2, 256)], {"loop_orders": [[0, 1, 2]]})
    d = info.value.diagnostics[0]
    assert d.code == "HPL204" and "`tb`" in d.message


def test_two_grid_loops_fill_one_empty_buffer():
    ck = assert_matches_torch("""
        @helion.kernel()
        def halves(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for t in hl.tile(64, block_size=32):
                out[t, :] = x[t, :] + 1
            for t in hl.tile(64, 128, block_size=32):
                out[t, :] = x[t, :] * 2
            return out
    """, [torch.randn(128, 128)], lambda x: torch.cat([x[:64] + 1, x[64:] * 2]))
    first, second = ck.plan.calls
    assert next(o for o in first.operands if o.tensor == "out").kind == "output"
    second_out = next(o for o in second.operands if o.tensor == "out")
    assert second_out.kind == "inout" and not second_out.reads_old  # aliased, old contents left in HBM
    assert "pl.BlockSpec(memory_space=pl.ANY),  # out: aliased to the output, not read" in ck.source


def test_clone_is_a_copy():
    def torch_fn(x):
        y = x.clone()
        x.mul_(0)
        return y

    assert_matches_torch("""
        @helion.kernel()
        def keep(x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            for t in hl.tile(x.size(0)):
                x[t, :] = x[t, :] * 0
            return y
    """, [torch.randn(64, 128)], torch_fn)


def test_writing_a_clone_leaves_the_argument_alone():
    assert_matches_torch("""
        @helion.kernel()
        def doubled(x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            for t in hl.tile(x.size(0)):
                y[t, :] = y[t, :] * 2
            return y
    """, [torch.randn(64, 128)], lambda x: x * 2)


def test_view_taken_before_a_write_sees_it():
    ck = assert_matches_torch("""
        @helion.kernel()
        def via_view(x: torch.Tensor) -> torch.Tensor:
            out = torch.zeros_like(x)
            flat = out.view(x.size(0) * x.size(1))
            for t in hl.tile(x.size(0)):
                out[t, :] = x[t, :] + 1
            res = torch.empty_like(flat)
            for t in hl.tile(flat.size(0)):
                res[t] = flat[t] * 2
            return res
    """, [torch.randn(16, 128)], lambda x: ((x + 1) * 2).reshape(-1))
    assert "# the view sees the new contents" in ck.source


def test_row_read_while_rows_are_written_is_sequential():
    def torch_fn(x):
        for i in range(x.shape[0]):
            x[i] = x[i] + x[0]
        return x

    assert_matches_torch("""
        @helion.kernel()
        def add_first(x: torch.Tensor) -> torch.Tensor:
            for i in hl.grid(x.size(0)):
                x[i, :] = x[i, :] + x[0, :]
            return x
    """, [torch.randn(4, 128)], torch_fn)


TWO_COLS = """
    @helion.kernel()
    def two_cols(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.zeros([m, 256], dtype=torch.float32, device=x.device)
        for tm in hl.tile(m):
            for i in hl.grid(2):
                out[tm, i] = x[tm, i] + 1
        return out
"""


@pytest.mark.parametrize("loop_type", ["unroll", "fori_loop"])
def test_inner_hl_grid_writes_part_of_a_zeroed_block(loop_type):
    assert_matches_torch(TWO_COLS, [torch.randn(16, 128)],
                         lambda x: torch.cat([x[:, :2] + 1, torch.zeros(16, 254)], 1), {"pallas_loop_type": loop_type})


def test_streaming_one_lane_at_a_time_stays_resident():
    # a block one lane wide cannot be streamed: under emit_pipeline the loop slices the whole row in VMEM
    ck = assert_matches_torch(TWO_COLS, [torch.randn(16, 128)],
                              lambda x: torch.cat([x[:, :2] + 1, torch.zeros(16, 254)], 1),
                              {"pallas_loop_type": "emit_pipeline"})
    assert all(op.memory != "hbm" for op in ck.plan.calls[0].operands)


@pytest.mark.parametrize("loop_type", ["unroll", "fori_loop"])
def test_nested_hl_grid_point_stores(loop_type):
    ck = assert_matches_torch("""
        @helion.kernel()
        def plus_row(x: torch.Tensor) -> torch.Tensor:
            n, m = x.size()
            out = torch.zeros_like(x)
            for i in hl.grid(n):
                for j in hl.grid(m):
                    out[i, j] = x[i, j] + i
            return out
    """, [torch.randn(4, 128)], lambda x: x + torch.arange(4.0)[:, None], {"pallas_loop_type": loop_type})
    assert not ck.check_lowering()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_one_element_read_and_written_along_the_lanes(dtype):
    # x[i] of a 1-D in/out block: the lane is masked out of its row (read) and merged into it (write)
    ck = assert_matches_torch("""
        @helion.kernel()
        def inc(x: torch.Tensor) -> torch.Tensor:
            for i in hl.grid(x.size(0)):
                x[i] += 1
            return x
    """, [torch.arange(16).to(dtype)], lambda x: x.add_(1))
    assert "jnp.sum(jnp.where(" in ck.source
    if libtpu_available():  # lowering accepts unaligned lane indexing; only the real compiler rejects it
        assert not [d for d in ck.check_tpu_compile() if d.is_error]


def test_grid_writes_some_rows_of_a_zeroed_buffer():
    assert_matches_torch("""
        @helion.kernel()
        def first_rows(x: torch.Tensor) -> torch.Tensor:
            out = torch.zeros([4, 128], dtype=torch.float32, device=x.device)
            for i in hl.grid(2):
                out[i, :] = x[i, :] + 1
            return out
    """, [torch.randn(4, 128)], lambda x: torch.cat([x[:2] + 1, torch.zeros(2, 128)]))


@pytest.mark.parametrize("loop_type", STRATEGIES)
def test_inner_two_dim_loop_accumulates_into_a_revisited_block(loop_type):
    ck = assert_matches_torch("""
        @helion.kernel()
        def row_sums(x: torch.Tensor) -> torch.Tensor:
            m, a, b = x.size()
            out = torch.zeros([m, a], dtype=torch.float32, device=x.device)
            for tm in hl.tile(m):
                for ta, tb in hl.tile([a, b]):
                    out[tm, ta] += x[tm, ta, tb].sum(-1)
            return out
    """, [torch.randn(8, 256, 256)], lambda x: x.sum(-1),
        {"block_sizes": [8, 128, 128], "pallas_loop_type": loop_type}, rtol=1e-4, atol=1e-4)
    if loop_type == "emit_pipeline":  # the streamed block is copied in at the first inner step on it
        assert "@pl.when(tb == 0)" in ck.source
        assert not ck.check_lowering()


WRITE_THEN_UPDATE = """
        @helion.kernel()
        def twice(x: torch.Tensor) -> torch.Tensor:
            m, n = x.size()
            out = torch.empty_like(x)
            for tm in hl.tile(m):
                for tn in hl.tile(n):
                    out[tm, tn] = x[tm, tn] * 2
                for tn in hl.tile(n):
                    out[tm, tn] = out[tm, tn] + 1
            return out
"""  # two inner loops over one output row: a write, then a read-modify-write


@pytest.mark.parametrize("loop_type", ["unroll", "fori_loop"])
def test_two_inner_loops_write_then_update_one_resident_row(loop_type):
    assert_matches_torch(WRITE_THEN_UPDATE, [torch.randn(32, 256)], lambda x: x * 2 + 1, {"block_sizes": [16, 128, 128], "pallas_loop_type": loop_type})


def test_two_pipelines_on_one_tensor_share_its_whole_array():
    """Two emit_pipeline loops would stream `out` through two sets of blocks; placed again, its whole array is
    one VMEM block for the call that both loops slice (written back once), and the result matches torch."""
    ck = assert_matches_torch(WRITE_THEN_UPDATE, [torch.randn(32, 256)], lambda x: x * 2 + 1, {"block_sizes": [16, 128, 128], "pallas_loop_type": "emit_pipeline"})
    assert "out_specs=pl.BlockSpec((32, 256), lambda tm: (0, 0))" in ck.source, ck.source
    assert "'arbitrary'" in ck.source and not ck.check_lowering()


def test_write_through_a_view_while_reading_the_tensor_is_diagnosed():
    with pytest.raises(CompileError) as info:
        compile_for("""
            @helion.kernel()
            def k(x: torch.Tensor) -> torch.Tensor:
                m, n = x.size()
                x2 = x.view(m, n)
                for i in hl.grid(4):
                    x2[i, :] = x[i, :] + x[0, :]
                return x
        """, [torch.randn(4, 128)])
    d = info.value.diagnostics[0]
    assert d.code == "HPL204" and "view" in d.message and d.range.start.line == 10


@pytest.mark.parametrize("block", [64, 32])
def test_partial_tile_ending_inside_the_array_keeps_the_rest(block):
    # hl.tile(100) over 128 rows: the last block's padding rows 100..127 are real rows of `out`
    ck = assert_matches_torch("""
        @helion.kernel()
        def head_rows(x: torch.Tensor) -> torch.Tensor:
            out = torch.zeros_like(x)
            for t in hl.tile(100):
                out[t, :] = x[t, :] + 1
            return out
    """, [torch.randn(128, 128)], lambda x: torch.cat([x[:100] + 1, torch.zeros(28, 128)]), {"block_sizes": [block]})
    assert "< 100), x_ref[...] + 1, out_out_ref[...])" in ck.source
    assert not ck.check_lowering()


@pytest.mark.parametrize("loop_type", ["unroll", "fori_loop"])
def test_partial_inner_tile_ending_inside_the_array_keeps_the_rest(loop_type):
    assert_matches_torch("""
        @helion.kernel()
        def head_cols(x: torch.Tensor) -> torch.Tensor:
            m, n = x.size()
            out = torch.zeros([m, 256], dtype=torch.float32, device=x.device)
            for tm in hl.tile(m):
                for tn in hl.tile(100):
                    out[tm, tn] = x[tm, tn] + 1
            return out
    """, [torch.randn(16, 256)], lambda x: torch.cat([x[:, :100] + 1, torch.zeros(16, 156)], 1),
        {"block_sizes": [16, 128], "pallas_loop_type": loop_type})


def test_read_modify_write_with_partial_edge_blocks():
    # jax's TPU interpret mode cannot alias an array with partial edge blocks: the host pads, then crops
    ck = assert_matches_torch("""
        @helion.kernel()
        def add_into(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            m, n = x.size()
            for tm, tn in hl.tile([m, n]):
                x[tm, tn] = x[tm, tn] + y[tm, tn]
            return x
    """, [torch.randn(100, 300), torch.randn(100, 300)], lambda x, y: x.add_(y), {"block_sizes": [64, 128]})
    assert "x = jnp.pad(x, ((0, 28), (0, 84)))" in ck.source and "x = x[:100, :300]" in ck.source
    assert not ck.check_lowering()


def test_atomic_add_into_a_tensor_smaller_than_its_block():
    assert_matches_torch("""
        @helion.kernel()
        def bump(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            for tile in hl.tile(x.size(0)):
                hl.atomic_add(x, [tile], y[tile])
            return x
    """, [torch.zeros(10), torch.ones(10)], lambda x, y: x.add_(y), {"block_sizes": [32]})


def test_buffers_the_loops_never_write_still_exist():
    assert_matches_torch("""
        @helion.kernel()
        def with_spare(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            spare = torch.full_like(x, 3.0)
            unread = torch.zeros([x.size(0)], dtype=torch.float32, device=x.device)
            out = torch.empty_like(x)
            for t in hl.tile(x.size(0)):
                out[t, :] = x[t, :] * 2 + unread[t][:, None]
            return out, spare, unread
    """, [torch.randn(16, 128)], lambda x: (x * 2, torch.full_like(x, 3.0), torch.zeros(16)))
