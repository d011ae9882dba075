"""Computed and tensor-valued indices: gathers, scatters, positions computed on the device, windows, static
and strided slices, and loaded blocks indexed again. Each kernel runs in TPU interpret mode and must match
plain torch; the generated code must also pass Mosaic lowering."""

import pytest
import torch

import compiler

SRC = '''
import torch
import helion
import helion.language as hl


@helion.kernel()
def gather_rows(table, idx):
    out = torch.empty([idx.size(0), table.size(1)], dtype=table.dtype, device=table.device)
    for tm, tn in hl.tile(out.size()):
        out[tm, tn] = table[idx[tm], tn]
    return out


@helion.kernel()
def gather_middle(table, idx):
    out = torch.empty([table.size(0), idx.size(0), table.size(2)], dtype=table.dtype, device=table.device)
    for ta, tb, tc in hl.tile(out.size()):
        out[ta, tb, tc] = table[ta, idx[tb], tc]
    return out


@helion.kernel()
def scatter_rows(values, idx):
    out = torch.zeros_like(values)
    for tm, tn in hl.tile(values.size()):
        out[idx[tm], tn] = values[tm, tn]
    return out


@helion.kernel()
def scatter_add_rows(acc, values, idx):
    for tm in hl.tile(values.size(0)):
        acc[idx[tm], :] += values[tm, :]
    return acc


@helion.kernel()
def heads_split(x, batch: int, heads: int):
    bh_count, seq, dim = x.size()
    out = torch.empty([batch, heads, seq, dim], dtype=x.dtype, device=x.device)
    for bh in hl.grid(bh_count):
        b = bh // heads
        h = bh % heads
        for tm in hl.tile(seq):
            out[b, h, tm, :] = x[bh, tm, :] * 2.0
    return out


@helion.kernel()
def flip_rows(x):
    rows, cols = x.shape
    out = torch.empty_like(x)
    for r in hl.grid(rows):
        out[r, :] = x[rows - 1 - r, :]
    return out


@helion.kernel()
def rotate_rows(x):
    out = torch.empty_like(x)
    for _ in hl.grid(1):
        for t in hl.tile(x.size(0), block_size=1):
            out[t.begin, :] = x[(t.begin + 3) % x.size(0), :]
    return out


@helion.kernel()
def every_block_fifth(x):
    out = torch.zeros_like(x)
    for t in hl.tile(x.size(0)):
        out[t.begin + 5] = x[t.begin + 5] * 3.0
    return out


@helion.kernel()
def shifted_rows(x):
    half = x.size(0) // 2
    out = torch.empty([half, x.size(1)], dtype=x.dtype, device=x.device)
    for t in hl.tile(half):
        out[t, :] = x[t.index + half, :] - x[t.index + 3, :]
    return out


@helion.kernel()
def column_slices(src, dst):
    for t in hl.tile(src.size(0)):
        dst[t, :40] = src[t, :40] * 2.0
        dst[t, 40:] = src[t, 40:] + 1.0
    return dst


@helion.kernel()
def even_rows(x):
    out = torch.empty([x.size(0) // 2, x.size(1)], dtype=x.dtype, device=x.device)
    for tn in hl.tile(x.size(1)):
        out[:, tn] = x[::2, tn] + x[1::2, tn]
    return out


@helion.kernel()
def middle_heads(x):
    out = torch.empty([x.size(0), 128], dtype=x.dtype, device=x.device)
    for t in hl.tile(x.size(0)):
        v = x[t, :] * 2.0
        heads = v.reshape(v.size(0), 4, 64)
        out[t, :] = heads[:, 1 + hl.arange(2), :].reshape(v.size(0), 128)
    return out


@helion.kernel()
def block_rows_one_by_one(x, init):
    out = torch.empty_like(init)
    for _r in hl.grid(1):
        state = init[0, :, :]
        for outer in hl.tile(x.size(0), block_size=4):
            block = x[outer, :, :]
            for local in hl.tile(4, block_size=1):
                state = state * 0.5 + block[local.begin, :, :]
        out[0, :, :] = state
    return out


@helion.kernel()
def permute_around_the_loop(x, idx):
    gathered = x[idx]
    out = torch.empty_like(gathered)
    for t in hl.tile(out.size()):
        out[t] = gathered[t] * 2.0
    result = torch.zeros_like(out)
    result[idx] = out
    return result


@helion.kernel()
def windows_from_table(table, starts):
    out = torch.empty([starts.size(0), table.size(0), 128], dtype=table.dtype, device=table.device)
    for t in hl.tile(starts.size(0), block_size=1):
        begin = starts[t.begin] * 128
        out[t, :, :] = table[:, begin + hl.arange(128)][None, :, :]
    return out
'''

LOOPS = ("unroll", "fori_loop", "emit_pipeline")


@pytest.fixture(scope="module")
def module():
    return compiler.load(SRC)


def run(module, name, args, config=None, lower=True):
    kernel = module.kernels[name]
    ck = kernel.compile(args=dict(zip(kernel.params, args, strict=True)), config=config)
    out = ck(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    if lower:
        assert ck.check_lowering() == [], ck.source
    return ck, out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_gather_rows_is_exact(module, dtype):
    torch.manual_seed(0)
    table = (torch.randn(16, 128) * 1000).to(dtype) if dtype != torch.int32 else torch.randint(-2**31, 2**31 - 1,
                                                                                               (16, 128), dtype=dtype)
    idx = torch.randint(-16, 16, (128,), dtype=torch.int32)  # negative positions count from the end, as in torch
    ck, out = run(module, "gather_rows", (table, idx))
    assert torch.equal(out, table[idx.long()])
    assert "_gather(" in ck.source and ("HIGHEST" in ck.source)
    assert any(r.name == "table" and r.block_shape[0] == 16 for r in ck.vmem.rows)  # the whole gathered dim
    assert any("gather from all 16 positions" in a.indexing for a in ck.plan.accesses)


def test_gather_on_a_middle_dim(module):
    torch.manual_seed(1)
    table = torch.randn(4, 16, 128)
    idx = torch.randint(0, 16, (8,), dtype=torch.int32)
    _, out = run(module, "gather_middle", (table, idx))
    assert torch.equal(out, table[:, idx.long(), :])


def test_scatter_keeps_the_last_duplicate(module):
    torch.manual_seed(2)
    values = torch.randn(16, 128)
    idx = torch.tensor([0, 1, 1, 2, 4, 4, 4, 8, 8, 9, 10, 10, 12, 13, 14, 14], dtype=torch.int32)
    ck, out = run(module, "scatter_rows", (values, idx))
    expected = torch.zeros_like(values)
    expected[idx.long()] = values
    assert torch.equal(out, expected)
    assert "_scatter(" in ck.source


def test_scatter_accumulate_reads_then_writes(module):
    """`acc[idx] += v` is torch's gather-add-scatter (duplicates: the later sum wins), in place on an argument."""
    torch.manual_seed(3)
    acc = torch.randn(8, 128)
    values = torch.randn(8, 128)
    idx = torch.tensor([7, 6, 5, 4, 3, 2, 1, 0], dtype=torch.int32)
    expected = acc.clone()
    expected[idx.long()] += values
    ck, _ = run(module, "scatter_add_rows", (acc, values, idx), lower=False)
    got = acc.clone()
    ck(got, values, idx)
    assert torch.equal(got, expected)


@pytest.mark.parametrize("loop", LOOPS)
def test_positions_computed_from_the_grid_go_in_the_index_map(module, loop):
    x = torch.arange(8 * 16 * 128, dtype=torch.float32).view(8, 16, 128)
    ck, out = run(module, "heads_split", (x, 2, 4), {"pallas_loop_type": loop})
    assert torch.equal(out, (x * 2).reshape(2, 4, 16, 128))
    # b = bh // heads and h = bh % heads choose squeezed blocks: no whole-array copy
    assert "bh // 4, bh % 4" in ck.source


def test_row_flip(module):
    x = torch.arange(17 * 128, dtype=torch.float32).reshape(17, 128)
    _, out = run(module, "flip_rows", (x,))
    assert torch.equal(out, x.flip(0))


@pytest.mark.parametrize("loop", LOOPS)
def test_modulo_of_an_inner_position(module, loop):
    x = torch.randn(8, 128)
    _, out = run(module, "rotate_rows", (x,), {"pallas_loop_type": loop})
    assert torch.equal(out, x[[(i + 3) % 8 for i in range(8)]])


def test_scalar_positions_from_tile_begin(module):
    x = torch.arange(1024, dtype=torch.float32)
    ck, out = run(module, "every_block_fifth", (x,), {"block_sizes": [256]}, lower=False)
    expected = torch.zeros_like(x)
    expected[5::256] = x[5::256] * 3
    assert torch.equal(out, expected)


def test_windows_from_tile_index_plus_offset(module):
    x = torch.randn(64, 128)
    ck, out = run(module, "shifted_rows", (x,), {"block_sizes": [8]})
    assert torch.equal(out, x[32:] - x[3:35])
    # t.index + 32 starts on a block boundary: a plain BlockSpec block; t.index + 3 does not: a pl.ds window
    maps = {op.index_map for op in ck.plan.calls[0].operands}
    assert "lambda t: (t + 4, 0)" in maps and "pl.ds((t * 8) + 3, 8)" in ck.source


def test_static_column_slices_share_one_output_block(module):
    src = torch.randn(32, 256)
    ck, out = run(module, "column_slices", (src, torch.zeros(32, 256)), {"block_sizes": [8]})
    expected = torch.cat([src[:, :40] * 2, src[:, 40:] + 1], dim=1)
    assert torch.equal(out, expected)
    assert "0:40" in ck.source and "40:256" in ck.source


def test_strided_row_slices(module):
    x = torch.randn(16, 256)
    _, out = run(module, "even_rows", (x,), {"block_sizes": [128]})
    assert torch.equal(out, x[::2] + x[1::2])


def test_static_slice_of_a_computed_value(module):
    x = torch.randn(16, 256)
    _, out = run(module, "middle_heads", (x,))
    assert torch.equal(out, (x * 2).reshape(16, 4, 64)[:, 1:3, :].reshape(16, 128))


@pytest.mark.parametrize("loop", ["unroll", "fori_loop"])
def test_loaded_block_indexed_by_an_inner_position(module, loop):
    """`block[local.begin, :, :]` re-reads the tensor at outer.begin + local.begin inside the inner loop."""
    torch.manual_seed(4)
    x = torch.randn(8, 2, 128)
    init = torch.randn(1, 2, 128)
    ck, out = run(module, "block_rows_one_by_one", (x, init), {"pallas_loop_type": loop})
    state = init[0].clone()
    for row in x:
        state = state * 0.5 + row
    torch.testing.assert_close(out[0], state)


def test_window_start_read_from_a_table(module):
    table = torch.randn(8, 512)
    starts = torch.tensor([3, 0, 2, 1], dtype=torch.int32)
    ck, out = run(module, "windows_from_table", (table, starts))
    assert torch.equal(out, torch.stack([table[:, 128 * s:128 * s + 128] for s in starts.tolist()]))
    assert "starts_smem" in ck.source  # the starts are scalar reads: SMEM


def test_host_code_gathers_and_scatters_around_the_loop(module):
    x = torch.randn(256)
    idx = torch.randperm(256).to(torch.int32)
    ck, out = run(module, "permute_around_the_loop", (x, idx))
    expected = torch.zeros_like(x)
    expected[idx.long()] = x[idx.long()] * 2
    assert torch.equal(out, expected)
    assert ".at[idx].set(" in ck.source


BAD = '''
import torch
import helion
import helion.language as hl

@helion.kernel()
def two_tensor_indices(x, rows, cols):
    out = torch.empty([rows.size(0)], dtype=x.dtype, device=x.device)
    for t in hl.tile(rows.size(0)):
        out[t] = x[rows[t], cols[t]]
    return out

@helion.kernel()
def float_index(x, w):
    out = torch.empty_like(w)
    for t in hl.tile(w.size(0)):
        out[t] = x[w[t]]
    return out

@helion.kernel()
def mask_index(x):
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        v = x[t]
        out[t] = v[v > 0]
    return out

@helion.kernel()
def moving_slice(x, n):
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        k = n[0]
        out[t, :] = x[t, :k]
    return out

@helion.kernel()
def computed_then_indexed(x, i):
    out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
    for t in hl.tile(x.size(0)):
        v = x[t, :] + 1.0
        out[t] = v[:, i[0]]
    return out
'''


@pytest.mark.parametrize("name,args,code,words", [
    ("two_tensor_indices", "x=f32[16, 16], rows=i32[16], cols=i32[16]", "HPL202", "one tensor-valued index"),
    ("float_index", "x=f32[16], w=f32[16]", "HPL105", "must be integers"),
    ("mask_index", "x=f32[16]", "HPL202", "boolean-mask"),
    ("moving_slice", "x=f32[16, 128], n=i32[1]", "HPL106", "slice bounds"),
    ("computed_then_indexed", "x=f32[16, 128], i=i32[1]", "HPL202", "index the tensor it was loaded from"),
])
def test_unsupported_indexing_is_diagnosed_on_its_line(name, args, code, words):
    kernel = compiler.load(BAD).kernels[name]
    with pytest.raises(compiler.CompileError) as info:
        kernel.compile(args=args)
    d = info.value.diagnostics[0]
    assert d.code == code and words in d.message, d.message
    line = BAD.splitlines()[d.range.start.line]
    assert "[" in line  # the subscript's own line
