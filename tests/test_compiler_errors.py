"""Bad input yields diagnostics with exact source ranges; nothing a user can type escapes as an exception."""

import textwrap
from pathlib import Path

import pytest

import compiler
from compiler import CompileError

HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"


def compile_src(body: str, args: str = "x=f32[64, 256]", config=None):
    module = compiler.load(HEADER + textwrap.dedent(body))
    kernel = next(iter(module.kernels.values()))
    return kernel.compile(args=args, config=config)


def error_of(body: str, args: str = "x=f32[64, 256]", config=None):
    with pytest.raises(CompileError) as info:
        compile_src(body, args, config)
    return info.value.diagnostics[0]


def test_unsupported_while_loop():
    d = error_of("""
        @helion.kernel()
        def k(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.size(0)):
                while True:
                    pass
            return out
    """)
    assert d.code == "HPL101" and "while" in d.message
    assert (d.range.start.line, d.range.start.character) == (9, 8)
    assert (d.range.end.line, d.range.end.character) == (10, 16)


def test_bad_block_size_on_tile_line():
    # the kernel reads the block number, so raising the block to a legal size would change its result
    d = error_of("""
        @helion.kernel()
        def k(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tm, tn in hl.tile(x.size()):
                out[tm, tn] = x[tm, tn] * tn.id
            return out
    """, config={"block_sizes": [8, 100]})
    assert d.code == "HPL200"
    assert "block_sizes[1]=100" in d.message and "multiple of 128" in d.message and "try 128" in d.message
    assert d.range.start.line == 8 and d.range.start.character == 4
    assert d.data["block_index"] == 1 and d.data["suggested"] == 128


def test_illegal_block_raised_when_the_result_does_not_depend_on_it():
    ck = compile_src("""
        @helion.kernel()
        def k(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tm, tn in hl.tile(x.size()):
                out[tm, tn] = x[tm, tn] * 2
            return out
    """, config={"block_sizes": [8, 100]})
    assert ck.config["block_sizes"] == [8, 128]
    d = next(d for d in ck.diagnostics if d.code == "HPL205")
    assert not d.is_error and "block_sizes[1]=100" in d.message and "compiled with 128" in d.message
    assert d.range.start.line == 8 and d.data["block_index"] == 1 and d.data["suggested"] == 128


def test_illegal_block_of_a_loop_whose_trip_count_matters_is_not_raised():
    # `acc` adds the running `row` once per block: more blocks, another answer
    d = error_of("""
        @helion.kernel()
        def k(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty([x.size(0)], dtype=x.dtype, device=x.device)
            for tm in hl.tile(x.size(0)):
                row = hl.zeros([tm], dtype=torch.float32)
                acc = hl.zeros([tm], dtype=torch.float32)
                for tn in hl.tile(x.size(1)):
                    row = row + x[tm, tn].sum(-1)
                    acc = acc + row
                out[tm] = acc
            return out
    """, config={"block_sizes": [64, 64]})
    assert d.code == "HPL200" and "block_sizes[1]=64" in d.message


def test_sub_tile_block_must_divide_its_grid_tile():
    """Inner blocks may leave a partial last block (masked), but sub-tiles live inside their grid tile's block."""
    d = error_of("""
        @helion.kernel()
        def k(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tm in hl.tile(x.size(0)):
                for ts in hl.tile(tm.begin, tm.end):
                    out[ts, :] = x[ts, :] * 2
            return out
    """, args="x=f32[128, 256]", config={"block_sizes": [64, 24]})
    assert d.code == "HPL201" and "divide" in d.message and "block 64" in d.message and d.range.start.line == 9


def test_wrong_arity():
    d = error_of("""
        @helion.kernel()
        def k(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.size()):
                out[tile] = x[tile] + y[tile]
            return out
    """, args="x=f32[64, 256]")
    assert d.code == "HPL103" and "missing y" in d.message
    assert d.range.start.line == 6


def test_unknown_name_range():
    d = error_of("""
        @helion.kernel()
        def k(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.size()):
                out[tile] = x[tile] + bogus
            return out
    """)
    assert d.code == "HPL102" and "bogus" in d.message
    assert (d.range.start.line, d.range.start.character, d.range.end.character) == (9, 30, 35)


def test_syntax_error_is_a_diagnostic():
    m = compiler.load(HEADER + "@helion.kernel()\ndef k(x):\n    for t in hl.tile(x.size(:\n")
    assert m.kernels == {} and m.diagnostics[0].code == "HPL100"
    assert m.diagnostics[0].range.start.line == 6


def test_bad_args_line_range():
    src = HEADER + "# helion: args(x=f99[8, 128])\n@helion.kernel()\ndef k(x):\n    return x\n"
    m = compiler.load(src)
    d = m.diagnostics[0]
    assert d.code == "HPL104" and "f99" in d.message
    assert d.range.start.line == 4 and src.splitlines()[4][d.range.start.character:d.range.end.character] == "f99"


@pytest.mark.parametrize("args,code", [
    ("x=f32[-4, 128]", "HPL104"),
    ("x=f32[1099511627776, 1099511627776]", "HPL104"),
    ("x=c64[8, 128]", "HPL104"),
    ("x=f32[n, 128]", "HPL104"),
])
def test_absurd_shapes(args, code):
    body = """
        @helion.kernel()
        def k(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.size()):
                out[tile] = x[tile]
            return out
    """
    assert error_of(body, args=args).code == code


def test_recursion_is_reported():
    d = error_of("""
        def helper(n):
            return helper(n)

        @helion.kernel()
        def k(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            m = helper(3)
            for tile in hl.tile(x.size()):
                out[tile] = x[tile]
            return out
    """)
    assert d.code == "HPL101" and "recurses" in d.message


def test_vector_if_is_rejected():
    d = error_of("""
        @helion.kernel()
        def k(x: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            for tile in hl.tile(x.size()):
                v = x[tile]
                if v > 0:
                    v = v * 2
                out[tile] = v
            return out
    """)
    assert d.code == "HPL101" and "torch.where" in d.message and d.range.start.line == 10


def test_half_written_loop_never_raises():
    m = compiler.load(HEADER + "@helion.kernel()\ndef k(x):\n    for t in hl.tile(x.size(0)):\n        y = x[t\n")
    assert m.diagnostics and m.diagnostics[0].code == "HPL100"


def test_no_shape_set():
    m = compiler.load(HEADER + "@helion.kernel()\ndef k(x):\n    return x\n")
    with pytest.raises(CompileError) as info:
        m.kernels["k"].compile()
    assert info.value.diagnostics[0].code == "HPL107"


def test_import_styles_and_aliases():
    src = textwrap.dedent('''
        import torch
        from helion import kernel
        from helion import language as lang

        # helion: args(x=f32[16, 128])
        @kernel(config=None)
        def double(x: torch.Tensor) -> torch.Tensor:
            out = torch.zeros_like(x)
            for t in lang.tile(x.size()):
                out[t] = x[t] * 2
            return out
    ''')
    m = compiler.load(src)
    assert list(m.kernels) == ["double"]
    assert m.kernels["double"].compile().source


FLAT_GATHER = """
    @helion.kernel()
    def k(x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        n, v = x.shape
        out = torch.empty([n], dtype=x.dtype, device=x.device)
        flat = x.view(-1)
        for t in hl.tile(n):
            out[t] = hl.load(flat, [t.index * v + labels[t]])
        return out
"""


def test_a_dim_past_2_to_the_31_is_said_on_its_access():
    """TPU positions are int32: a flattened view of more than 2**31 elements cannot be addressed (jax would fail on
    the first constant of that size, which used to surface as a raw overflow in the lowering check)."""
    d = error_of(FLAT_GATHER, args="x=f32[32768, 131072], labels=i32[32768]")
    assert d.code == "HPL202" and "2147483647" in d.message and "`flat`" in d.message
    assert d.range.start.line == 11


def test_a_dim_of_exactly_2_to_the_31_gathers_and_lowers():
    """Positions 0 .. 2**31 - 1 fit int32: upstream's cross entropy at its own [16384, 131072] compiles (its flat
    gather copies 128-lane chunks of the logits rows by DMA) and lowers through Mosaic."""
    ck = compile_src(FLAT_GATHER, args="x=f32[16384, 131072], labels=i32[16384]", config={"block_sizes": [16]})
    assert not [d for d in ck.diagnostics if d.is_error]
    assert any("gathered by DMA" in a.indexing for a in ck.plan.accesses)
    assert not [d for d in ck.check_lowering() if d.is_error]


ASSERTS = """
    @helion.kernel()
    def norm(x: torch.Tensor, normalized_shape: list[int], w: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        assert w.size(0) == n, "weight size mismatch"
        assert normalized_shape[0] == n
        assert x.is_contiguous()
        out = torch.empty_like(x)
        for tile in hl.tile(m):
            out[tile, :] = x[tile, :] * w[None, :]
        return out
"""


def test_a_host_assert_that_fails_for_the_arguments_is_an_error_on_it():
    """Helion runs host code at call time: a false assert raises before the kernel runs, so it is an error
    here too (on the assert, with its message) — and arguments that keep the relations compile."""
    d = error_of(ASSERTS, "x=f32[64, 256], normalized_shape=[256], w=f32[128]")
    assert d.code == "HPL113" and d.message == ("this assert fails for these arguments: weight size mismatch "
                                                "(w.size(0) == n)")
    assert d.range.start.line == 8
    d = error_of(ASSERTS, "x=f32[64, 256], normalized_shape=[512], w=f32[256]")
    assert d.code == "HPL113" and d.range.start.line == 9
    assert compile_src(ASSERTS, "x=f32[64, 256], normalized_shape=[256], w=f32[256]").source


def test_reduced_shapes_keep_what_the_kernels_asserts_tie_together():
    """The tuner's gate and `check` shrink shapes by compiling candidates: a size an assert ties to a scalar
    argument (a layer norm's normalized_shape) stays, the others shrink."""
    from compiler.ir.callables import coerce_args
    from compiler.ir.chips import get_chip
    from compiler.tune.shrink import reduced_args

    kernel = next(iter(compiler.load(HEADER + textwrap.dedent(ASSERTS)).kernels.values()))
    args = coerce_args("x=f32[4096, 2048], normalized_shape=[2048], w=f32[2048]")
    small = reduced_args(kernel, args, {"block_sizes": [256]}, get_chip("v7x"))
    assert small["x"].shape == (512, 2048) and small["w"].shape == (2048,)


PACKED = """
@helion.kernel(static_shapes=True)
def packed_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    _, n = b.shape
    out = torch.zeros([m, n], dtype=torch.float32, device=a.device)
    block_k = hl.register_block_size(k // 2)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k // 2, block_size=block_k):
            start = tile_k.begin * 2
            pairs = a[tile_m, start:start + block_k * 2].reshape(tile_m, block_k, 2).sum(-1)
            acc = hl.dot(pairs, b[tile_k, tile_n], acc=acc)
        out[tile_m, tile_n] = acc
    return out
"""


def test_reduced_shapes_keep_a_walked_dim_equal_to_the_loop_over_another_argument():
    """upstream int4_gemm walks B's rows with a loop over A's K // 2 and asserts nothing: B's rows (4096) and A's
    K (8192) shrank each on its own (to 128 and 128), so the file's own reference could not multiply them. A
    dim an inner loop walks that was exactly the loop's extent stays so; the two sizes then shrink together,
    by a common factor."""
    from compiler.ir.callables import coerce_args
    from compiler.ir.chips import get_chip
    from compiler.tune.shrink import reduced_args

    kernel = compiler.load(HEADER + textwrap.dedent(PACKED)).kernels["packed_rows"]
    args = coerce_args("a=bf16[8, 8192], b=bf16[4096, 1024]")
    small = reduced_args(kernel, args, {"block_sizes": [16, 64, 256], "pallas_loop_type": "unroll"}, get_chip("v7x"))
    assert small["a"].shape[1] == 2 * small["b"].shape[0] < 8192, small
    # a matmul whose K is as large as N (tests/kernels/matmul.py, which asserts the two K equal): x's K and y's
    # K, each stuck alone once N has its two tiles, go together
    matmul = compiler.load(Path(__file__).parent / "kernels" / "matmul.py").kernels["matmul"]
    square = coerce_args("x=bf16[8192, 8192], y=bf16[8192, 8192]")
    small = reduced_args(matmul, square, {"block_sizes": [256, 1024, 512], "pallas_loop_type": "unroll"},
                         get_chip("v7x"))
    assert (small["x"].shape, small["y"].shape) == ((512, 1024), (1024, 2048)), small


ROWS_IN_BLOCKS = """
@helion.kernel(static_shapes=True)
def scaled_rows(g: torch.Tensor, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    m_block = hl.register_block_size(x.size(0))
    out = torch.empty_like(x)
    for outer in hl.tile(x.size(0), block_size=m_block):
        for rows in hl.tile(outer.begin, outer.end):
            out[rows, :] = (g[rows, :].to(torch.float32) * x[rows, :].to(torch.float32) * r[rows, :]).to(x.dtype)
    return out
"""


def test_reduced_shapes_keep_the_dims_one_loop_walks_the_same_size():
    """upstream rms_norm_bwd walks x's, grad_out's and rsqrt's rows with one loop over x's: grad_out's and rsqrt's
    rows shrank alone (384 of x's 512), so the gate's eager reference could not run and the winner was only
    'unverified'. Dims one loop walks that were the same size stay the same size."""
    from compiler.ir.callables import coerce_args
    from compiler.ir.chips import get_chip
    from compiler.tune.shrink import reduced_args

    kernel = compiler.load(HEADER + textwrap.dedent(ROWS_IN_BLOCKS)).kernels["scaled_rows"]
    args = coerce_args("g=bf16[2048, 4096], x=bf16[2048, 4096], r=f32[2048, 1]")
    small = reduced_args(kernel, args, {"block_sizes": [256, 128], "pallas_loop_type": "unroll"}, get_chip("v7x"))
    rows = {name: spec.shape[0] for name, spec in small.items()}
    assert len(set(rows.values())) == 1 and rows["x"] < 2048, small
