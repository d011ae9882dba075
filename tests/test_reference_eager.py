"""The eager reference (compiler.reference) against plain torch: kernel files and the language surface."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

from compiler.ir.specs import parse_spec
from compiler.reference import ReferenceRunError, load_module, make_inputs, run_reference

EXAMPLES = Path(__file__).parents[1] / "examples"
SEED_KERNELS = Path(__file__).parents[2] / "shared" / "kernels"
KERNEL_FILES = sorted(EXAMPLES.glob("*.py")) + (
    sorted(SEED_KERNELS.glob("*.py")) if SEED_KERNELS.is_dir() else []
)

# None = the reference's defaults; the others give partial last blocks and tiny tiles.
BLOCK_SETTINGS = [None, [1, 24, 40, 56], [2, 64, 32, 128]]
TOLERANCES = {torch.float32: {"rtol": 1e-4, "atol": 1e-4}, torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2}}


def _cast(value: object, dtype: torch.dtype) -> object:
    if isinstance(value, tuple):
        return tuple(_cast(v, dtype) for v in value)
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    return value


def _source(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _line_of(source: str, marker: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if marker in line)


def test_kernel_files_found() -> None:
    assert {p.stem for p in EXAMPLES.glob("*.py")} >= {
        "add",
        "softmax",
        "batch_softmax",
        "bmm",
        "rms_norm_bwd",
        "attention",
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("path", KERNEL_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_kernel_file_matches_its_reference(path: Path, dtype: torch.dtype) -> None:
    module = load_module(path.read_text(), str(path))
    (name, kernel), *others = module.kernels.items()
    assert not others, "one kernel per file"
    specs = {arg: parse_spec(text) for arg, text in module.namespace["SMALL"].items()}
    args = [_cast(a, dtype) for a in make_inputs(specs, seed=1)]
    # the reference sees the same (rounded) values, in f32
    expected = _cast(module.namespace["reference"](*[_cast(a, torch.float32) for a in args]), dtype)
    used = set()
    for block_sizes in BLOCK_SETTINGS:
        torch.testing.assert_close(module.run(name, args, block_sizes), expected, **TOLERANCES[dtype])
        used.add(tuple(kernel.resolved_block_sizes))
    assert len(used) == len(BLOCK_SETTINGS), f"block sizes had no effect: {used}"


ATTRS = _source(
    """
    import torch
    import helion
    import helion.language as hl

    @helion.kernel
    def attrs(x: torch.Tensor) -> torch.Tensor:
        n = x.size(0)
        info = torch.zeros([n, 6], dtype=torch.int64)
        for tile in hl.tile(n):
            info[tile, 0] = tile.begin
            info[tile, 1] = tile.end
            info[tile, 2] = tile.id
            info[tile, 3] = tile.block_size
            info[tile, 4] = tile.count
            info[tile, 5] = tile.index
        return info
    """
)


@pytest.mark.parametrize("n,block", [(10, 4), (12, 4), (5, 8), (7, 1)])
def test_tile_attributes(n: int, block: int) -> None:
    info = run_reference(ATTRS, "attrs", [torch.zeros(n)], [block])
    for i in range(n):
        begin = i // block * block
        end = min(begin + block, n)
        assert info[i].tolist() == [begin, end, i // block, block, -(-n // block), i]


def test_tile_index_is_int32_range() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel()
        def idx(x):
            out = torch.zeros_like(x)
            for t in hl.tile(x.size(0)):
                assert t.index.dtype == torch.int32
                out[t] = x[t.index] + hl.arange(t.begin, t.end).to(x.dtype)
            return out
        """
    )
    x = torch.randn(9)
    torch.testing.assert_close(run_reference(src, "idx", [x], [4]), x + torch.arange(9.0))


def test_multi_dim_tiles_and_size_tuple() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def twice(x):
            out = torch.empty_like(x)
            seen = []
            for tiles in hl.tile(x.size()):
                assert isinstance(tiles, tuple) and len(tiles) == 3
                out[tiles] = 2 * x[tiles]
            for tile_a, tile_b in hl.tile([x.size(0), x.size(1)]):
                seen.append((tile_a.begin, tile_b.begin))
            return out, seen
        """
    )
    module = load_module(src)
    x = torch.randn(5, 6, 7)
    out, seen = module.run("twice", [x], [2, 4, 3, 3, 5])
    torch.testing.assert_close(out, 2 * x)
    assert module.kernels["twice"].resolved_block_sizes == [2, 4, 3, 3, 5]
    assert seen == [(a, b) for a in (0, 3) for b in (0, 5)]  # row-major, partial last blocks


def test_grid_yields_ints_and_takes_no_block_size() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def g(x):
            m, n = x.size()
            out = torch.empty_like(x)
            for i, j in hl.grid([m, n]):
                assert isinstance(i, int) and isinstance(j, int)
                out[i, j] = x[i, j] * (i + j)
            rows = torch.empty_like(x)
            for i in hl.grid(m):
                row = x[i, :]
                assert row.dim() == 1
                for t in hl.tile(n):
                    rows[i, t] = row[t] + i
            for i in hl.grid(1, m, 2):
                rows[i, :] = 0
            return out, rows
        """
    )
    module = load_module(src)
    x = torch.randn(4, 6)
    out, rows = module.run("g", [x], [4])
    i, j = torch.meshgrid(torch.arange(4.0), torch.arange(6.0), indexing="ij")
    torch.testing.assert_close(out, x * (i + j))
    expected = x + i
    expected[1::2] = 0
    torch.testing.assert_close(rows, expected)
    assert module.kernels["g"].resolved_block_sizes == [4]


def test_tile_range_and_literal_block_size_consume_no_slot() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def ranges(x):
            spans = []
            for t in hl.tile(2, 10, block_size=3):
                spans.append((t.begin, t.end, t.id))
            step = 5
            for t in hl.tile(x.size(0), block_size=step):
                spans.append((t.begin, t.end))
            for t in hl.tile(x.size(0)):
                spans.append(t.block_size)
            for a, b in hl.tile([3, x.size(0)], block_size=[None, 6]):
                spans.append((a.block_size, b.block_size))
            return spans
        """
    )
    module = load_module(src)
    spans = module.run("ranges", [torch.zeros(8)], [4, 2])
    assert spans == [(2, 5, 0), (5, 8, 1), (8, 10, 2), (0, 5), (5, 8), 4, 4, (2, 6), (2, 6), (2, 6), (2, 6)]
    assert module.kernels["ranges"].resolved_block_sizes == [4, 2]


def test_register_block_size_and_inner_loops_keep_their_slots() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        def row_sums(x, tile_m, out):
            for tile_n in hl.tile(x.size(1)):
                out[tile_m] += x[tile_m, tile_n].sum(-1)

        @helion.kernel
        def sums(x):
            m, n = x.size()
            bm = hl.register_block_size(m)
            out = torch.zeros(m)
            twice = torch.zeros(m)
            inner = set()
            for tile_m in hl.tile(m, block_size=bm):
                for tile_n in hl.tile(n):
                    inner.add(tile_n.block_size)
                row_sums(x, tile_m, out)
                row_sums(x, tile_m, twice)
            return out, twice, bm, inner
        """
    )
    module = load_module(src)
    x = torch.randn(7, 10)
    out, twice, bm, inner = module.run("sums", [x], [3, 4, 6, 2])
    assert (bm, inner) == (3, {4})
    # slot order: register_block_size, the inner loop, then each inlined helper call gets its own
    assert module.kernels["sums"].resolved_block_sizes == [3, 4, 6, 2]
    torch.testing.assert_close(out, x.sum(1))
    torch.testing.assert_close(twice, x.sum(1))


def test_default_block_sizes_cover_the_extent() -> None:
    module = load_module(ATTRS)
    module.run("attrs", [torch.zeros(300)])
    assert module.kernels["attrs"].resolved_block_sizes == [128]
    module.run("attrs", [torch.zeros(5)])
    assert module.kernels["attrs"].resolved_block_sizes == [8]


def test_partial_blocks_none_ellipsis_and_slices() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def shapes(x):
            m, n = x.size()
            out = torch.zeros(m, n, 2)
            sizes = []
            for tm in hl.tile(m):
                blk = x[tm, :]
                sizes.append(tuple(blk.shape))
                out[tm, :, 0] = x[tm, None][:, 0] + x[..., tm].T
                out[tm, 1:3, 1] = blk[:, 1:3]
            return out, sizes
        """
    )
    x = torch.randn(10, 10)
    out, sizes = run_reference(src, "shapes", [x], [4])
    assert sizes == [(4, 10), (4, 10), (2, 10)]
    torch.testing.assert_close(out[:, :, 0], x + x.T)
    torch.testing.assert_close(out[:, 1:3, 1], x[:, 1:3])
    assert not out[:, 3:, 1].any()


def test_inplace_add_store_returns_none() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel(static_shapes=True)
        def accumulate(y: torch.Tensor, x: torch.Tensor, alpha: float) -> None:
            for tile in hl.tile(y.size(0)):
                y[tile] += alpha * x[tile]
                y[tile, 0] -= 1
        """
    )
    y0 = torch.randn(11, 3)
    x = torch.randn(11, 3)
    y = y0.clone()
    assert run_reference(src, "accumulate", [y, x, 0.5], [4]) is None
    expected = y0 + 0.5 * x
    expected[:, 0] -= 1
    torch.testing.assert_close(y, expected)


def test_several_outputs_and_zeros_full_shapes() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def stats(x: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
            m, n = x.size()
            mean = torch.empty(m)
            top = torch.empty(m, dtype=torch.bfloat16)
            for tm in hl.tile(m):
                acc = hl.zeros([tm], dtype=torch.float32)
                best = hl.full([tm, 1], float("-inf"))
                assert best.dtype == torch.float32 and best.shape[0] == tm.end - tm.begin
                for tn in hl.tile(n):
                    acc = acc + x[tm, tn].sum(-1)
                    best = torch.maximum(best, x[tm, tn].amax(-1, keepdim=True))
                mean[tm] = acc / n + eps
                top[tm] = hl.full([tm], 2, dtype=torch.bfloat16) * best[:, 0].to(torch.bfloat16)
            return mean, top
        """
    )
    x = torch.randn(9, 13)
    mean, top = run_reference(src, "stats", [x, 0.25], [4, 5])
    torch.testing.assert_close(mean, x.mean(1) + 0.25)
    torch.testing.assert_close(top, (2 * x.amax(1)).to(torch.bfloat16))


def test_aliased_imports() -> None:
    src = _source(
        """
        import torch
        from helion import kernel, cdiv
        import helion.language as language
        from helion.language import tile as blocks, zeros
        from helion import language as lang2

        @kernel(config=None)
        def scaled(x, factor: int):
            out = torch.empty_like(x)
            for t in blocks(x.size(0)):
                out[t] = x[t] * factor + zeros([t]) + language.zeros([t]) + lang2.full([t], 0.0)
            return out, cdiv(x.size(0), 4)
        """
    )
    x = torch.randn(10)
    before = sys.modules.get("helion")
    out, blocks = run_reference(src, "scaled", [x, 3], [4])
    assert sys.modules.get("helion") is before  # nothing registered, the real helion never imported
    torch.testing.assert_close(out, 3 * x)
    assert blocks == 3


def test_decorator_config_supplies_default_block_sizes() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel(config=helion.Config(block_sizes=[3], pallas_loop_type="unroll"))
        def one(x):
            return [t.block_size for t in hl.tile(x.size(0))]

        @helion.kernel(configs=[helion.Config(block_sizes=[5]), helion.Config(block_sizes=[2])])
        def two(x):
            return [t.block_size for t in hl.tile(x.size(0))]
        """
    )
    module = load_module(src)
    x = torch.zeros(10)
    assert module.run("one", [x]) == [3] * 4
    assert module.run("one", [x], [4]) == [4] * 3
    assert module.run("two", [x]) == [5] * 2
    assert module.namespace["one"](x) == [3] * 4  # calling the kernel directly works too


def test_dot_dtypes_and_batched() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def dots(a, b, a3, b3):
            return (
                hl.dot(a, b),
                hl.dot(a, b, out_dtype=torch.float32),
                hl.dot(a, b, acc=hl.zeros([a.size(0), b.size(1)]) + 1),
                hl.dot(a3, b3),
                hl.dot(a.to(torch.int8), b.to(torch.int8)),
            )
        """
    )
    a = torch.randn(6, 8).to(torch.bfloat16)
    b = torch.randn(8, 5).to(torch.bfloat16)
    a3, b3 = torch.randn(2, 6, 8), torch.randn(2, 8, 5)
    plain, f32, acc, batched, ints = run_reference(src, "dots", [a, b, a3, b3])
    exact = a.float() @ b.float()
    assert (plain.dtype, f32.dtype, acc.dtype, ints.dtype) == (
        torch.bfloat16,
        torch.float32,
        torch.float32,
        torch.int32,
    )
    torch.testing.assert_close(plain, exact.to(torch.bfloat16))
    torch.testing.assert_close(f32, exact)
    torch.testing.assert_close(acc, exact + 1)
    torch.testing.assert_close(batched, torch.bmm(a3, b3))
    assert torch.equal(ints, (a.to(torch.int8).long() @ b.to(torch.int8).long()).int())


def test_mixed_precision_addmm_and_baddbmm() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def mm(acc, a, b, acc3, a3, b3):
            return (
                torch.addmm(acc, a, b),
                acc.addmm(a, b, beta=0.5, alpha=2.0),
                torch.baddbmm(acc3, a3, b3),
                torch.addmm(acc.to(torch.bfloat16), a, b),
            )
        """
    )
    acc, acc3 = torch.randn(4, 5), torch.randn(2, 4, 5)
    a, b = torch.randn(4, 8).to(torch.bfloat16), torch.randn(8, 5).to(torch.bfloat16)
    a3, b3 = torch.randn(2, 4, 8).to(torch.bfloat16), torch.randn(2, 8, 5).to(torch.bfloat16)
    plain, scaled, batched, low = run_reference(src, "mm", [acc, a, b, acc3, a3, b3])
    exact = a.float() @ b.float()
    torch.testing.assert_close(plain, acc + exact)
    torch.testing.assert_close(scaled, 0.5 * acc + 2.0 * exact)
    torch.testing.assert_close(batched, acc3 + a3.float() @ b3.float())
    assert low.dtype == torch.bfloat16
    with pytest.raises(RuntimeError):  # outside a kernel, eager torch keeps its own rules
        torch.addmm(acc, a, b)


def test_out_dtype_matmuls_accumulate_in_f32() -> None:
    """`torch.bmm(q, k, torch.float32)` (upstream's attention example) and the other `out_dtype` overloads:
    eager torch on the CPU has no kernel for them; in a kernel they are the f32 product, in out_dtype."""
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def mm(acc, a, b, a3, b3):
            return (
                torch.bmm(a3, b3, torch.float32),
                torch.bmm(a3, b3, out_dtype=torch.float32),
                torch.mm(a, b, out_dtype=torch.float32),
                torch.addmm(acc, a, b, torch.float32),
                torch.bmm(a3, b3),
            )
        """
    )
    acc = torch.randn(4, 5).to(torch.bfloat16)
    a, b = torch.randn(4, 8).to(torch.bfloat16), torch.randn(8, 5).to(torch.bfloat16)
    a3, b3 = torch.randn(2, 4, 8).to(torch.bfloat16), torch.randn(2, 8, 5).to(torch.bfloat16)
    batched, keyword, plain, added, low = run_reference(src, "mm", [acc, a, b, a3, b3])
    exact3 = a3.float() @ b3.float()
    assert batched.dtype == keyword.dtype == plain.dtype == added.dtype == torch.float32
    torch.testing.assert_close(batched, exact3)
    torch.testing.assert_close(keyword, exact3)
    torch.testing.assert_close(plain, a.float() @ b.float())
    torch.testing.assert_close(added, acc.float() + a.float() @ b.float())
    assert low.dtype == torch.bfloat16  # without out_dtype, eager torch's own bf16 product


def test_helpers_and_reference_function_run_normally() -> None:
    src = _source(
        """
        import math
        import torch, helion, helion.language as hl

        def load_scaled(x, tile):
            return x[tile] * math.pi

        @helion.kernel
        def k(x):
            out = torch.empty_like(x)
            for tile in hl.tile(x.size(0)):
                out[tile] = load_scaled(x, tile)
            return out.view(-1, 2).sum(1)

        def reference(x):
            return (x * math.pi).view(-1, 2).sum(1)

        SMALL = {"x": "f32[12]"}
        """
    )
    module = load_module(src)
    x = torch.randn(12)
    torch.testing.assert_close(module.run("k", [x], [5]), module.namespace["reference"](x))


def test_kernel_error_reports_kernel_line() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def broken(x, y):
            out = torch.empty_like(x)
            for t in hl.tile(x.size(0)):
                out[t] = x[t] + y[t, :3]  # boom
            return out
        """
    )
    with pytest.raises(ReferenceRunError) as info:
        run_reference(src, "broken", [torch.randn(8, 4), torch.randn(8, 4)])
    err = info.value
    assert (err.line, err.kernel) == (_line_of(src, "# boom"), "broken")
    assert "y[t, :3]" in str(err) and isinstance(err.__cause__, RuntimeError)


def test_helper_error_reports_innermost_line() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        def helper(v):
            return v.reshape(3, -1)  # bad reshape

        @helion.kernel
        def k(x):
            for t in hl.tile(x.size(0)):
                helper(x[t])
        """
    )
    with pytest.raises(ReferenceRunError) as info:
        run_reference(src, "k", [torch.randn(8)], [4])
    assert info.value.line == _line_of(src, "# bad reshape")


@pytest.mark.parametrize(
    "src,marker",
    [
        ("import torch\n\ndef f(:\n    pass\n", "def f(:"),
        ("import torch\nx = 1\ny = x / 0  # here\n", "# here"),
        ("import helion.nope  # here\n", "# here"),
        ("import helion\nhelion.autotune  # here\n", "# here"),
    ],
    ids=["syntax", "module-level", "unknown-submodule", "unknown-attribute"],
)
def test_module_errors_report_line(src: str, marker: str) -> None:
    with pytest.raises(ReferenceRunError) as info:
        load_module(src)
    assert info.value.line == _line_of(src, marker)


def test_misuse_is_reported() -> None:
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def k(x):
            for t in hl.tile(x.size(0)):
                x[t] = hl.inline_asm_elementwise(x[t])  # unsupported

        def outside(x):
            return list(hl.tile(x.size(0)))
        """
    )
    module = load_module(src)
    with pytest.raises(ReferenceRunError, match="inline_asm_elementwise") as info:
        module.run("k", [torch.zeros(4)])
    assert info.value.line == _line_of(src, "# unsupported")
    with pytest.raises(RuntimeError, match="inside a @helion.kernel"):
        module.namespace["outside"](torch.zeros(4))
    with pytest.raises(ReferenceRunError, match="no @helion.kernel function named 'outside'"):
        module.run("outside", [torch.zeros(4)])
    with pytest.raises(ReferenceRunError, match="positive"):
        module.run("k", [torch.zeros(4)], [0])


def test_register_tunable_reads_the_launch_config_else_the_fragments_default() -> None:
    """upstream matmul_split_k: `hl.register_tunable("split_k", PowerOfTwoFragment(1, 256))` is the config's
    value when the caller passes the compiled config, else the fragment's default (low, or default_val)."""
    src = _source(
        """
        import torch, helion, helion.language as hl
        from helion.autotuner import BooleanFragment, EnumFragment, IntegerFragment, PowerOfTwoFragment

        @helion.kernel
        def tunables(x):
            return (hl.register_tunable("split_k", PowerOfTwoFragment(1, 256)),
                    hl.register_tunable("depth", IntegerFragment(1, 8, 3)),
                    hl.register_tunable("mode", EnumFragment(("a", "b"))),
                    hl.register_tunable("flag", BooleanFragment()))
        """
    )
    x = torch.zeros(4)
    module = load_module(src, kernel="tunables")
    assert module.run("tunables", [x]) == (1, 3, "a", False)
    assert module.run("tunables", [x], tunables={"split_k": 8, "mode": "b", "block_sizes": []}) == (8, 3, "b", False)
    with pytest.raises(ReferenceRunError, match="split_k=6 is not a value of PowerOfTwoFragment"):
        module.run("tunables", [x], tunables={"split_k": 6})


def test_barrier_and_device_keywords_run_as_helion_takes_them() -> None:
    """upstream split_k_barrier: `hl.zeros(shape, device=..., dtype=...)` and `hl.barrier()` between two grid
    loops (which run one after the other here)."""
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def two_phase(x):
            partial = torch.empty_like(x)
            out = torch.empty_like(x)
            for t in hl.tile(x.size(0)):
                acc = hl.zeros([t], device=x.device, dtype=x.dtype)
                partial[t] = acc + x[t] * 2
            hl.barrier()
            for t in hl.tile(x.size(0)):
                out[t] = partial[t] + 1
            return out
        """
    )
    x = torch.randn(64)
    torch.testing.assert_close(run_reference(src, "two_phase", [x], [16]), x * 2 + 1)


def test_fp8_kernels_run_in_the_reference_process() -> None:
    """fp8 x fp8 accumulates in f32 (torch will not promote fp8 types), and fp8 tensors cross the reference
    process's pipe (torch 2.13 pickles them but cannot unpickle them: the process died on upstream fp8_matmul)."""
    from compiler.reference import ReferenceProcess

    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def mm8(x, y):
            out = torch.empty([x.size(0), y.size(1)], dtype=torch.float32)
            for tm in hl.tile(x.size(0)):
                out[tm, :] = hl.dot(x[tm, :], y)
            return out, x
        """
    )
    x = torch.randn(16, 32).to(torch.float8_e4m3fn)
    y = torch.randn(32, 8).to(torch.float8_e4m3fn)
    with ReferenceProcess() as process:
        (out, back), args = process.run(src, "mm8", [x, y], [8])
    torch.testing.assert_close(out, x.float() @ y.float())
    assert back.dtype == args[1].dtype == torch.float8_e4m3fn and torch.equal(back.view(torch.uint8), x.view(torch.uint8))


def test_load_and_store_read_and_write_masked() -> None:
    """hl.load / hl.store (upstream concatenate, cross_entropy, grouped_gemm): each index item adds its own
    dims; positions past the tensor (a tile running over it) or where extra_mask is False read 0 / are left
    alone."""
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def joined(x, y, picks):
            out = torch.empty([x.size(0), x.size(1) + y.size(1)], dtype=x.dtype)
            for t0, t1 in hl.tile(out.size()):
                left = hl.load(x, [t0, t1], extra_mask=(t1.index < x.size(1))[None, :])
                right = hl.load(y, [t0, t1.index - x.size(1)], extra_mask=(t1.index >= x.size(1))[None, :])
                out[t0, t1] = left + right
            gathered = torch.empty([picks.size(0)], dtype=x.dtype)
            for t in hl.tile(picks.size(0)):
                gathered[t] = hl.load(x.view(-1), [picks[t]])
            copy = torch.zeros_like(x)
            for t0, t1 in hl.tile(x.size()):
                hl.store(copy, [t0, t1], x[t0, t1] * 2, extra_mask=(t1.index % 2 == 0)[None, :])
            return out, gathered, copy
        """
    )
    x, y = torch.randn(8, 24), torch.randn(8, 40)
    picks = torch.tensor([0, 5, 191, 192, -1])  # the last two are outside x: 0
    out, gathered, copy = run_reference(src, "joined", [x, y, picks], [4, 16, 8, 4, 16])
    torch.testing.assert_close(out, torch.cat([x, y], 1))
    torch.testing.assert_close(gathered, torch.tensor([x.view(-1)[0], x.view(-1)[5], x.view(-1)[191], 0, 0]))
    expected = torch.zeros_like(x)
    expected[:, ::2] = x[:, ::2] * 2
    torch.testing.assert_close(copy, expected)


def test_what_a_kernel_never_writes_reads_as_interpret_mode_leaves_it() -> None:
    """torch.empty's contents are undefined: in a kernel they are NaN (floats) and the largest value (ints),
    as TPU interpret mode fills memory, so rows a kernel never writes (past a jagged tensor's last offset)
    agree with the generated code's instead of NaN against whatever the allocator returned."""
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def first_half(x):
            out = torch.empty_like(x)
            count = torch.empty([x.size(0)], dtype=torch.int32)
            for t in hl.tile(x.size(0) // 2):
                out[t, :] = x[t, :]
                count[t] = 1
            return out, count, torch.zeros_like(x)
        """
    )
    x = torch.randn(16, 8)
    out, count, zeros = run_reference(src, "first_half", [x], [4])
    torch.testing.assert_close(out[:8], x[:8])
    assert bool(out[8:].isnan().all()) and bool((count[8:] == torch.iinfo(torch.int32).max).all())
    assert bool((count[:8] == 1).all()) and not bool(zeros.isnan().any())


JAGGED = _source(
    """
    import torch, helion, helion.language as hl

    @helion.kernel
    def ragged_stats(values, offsets, widths, dense):
        m = values.size(1)
        flat = values.view(-1)
        rows = offsets.size(0) - 1
        centered_sq = torch.zeros([rows, m], dtype=values.dtype)
        peak = torch.zeros([rows, m], dtype=values.dtype)
        stretched = dense.clone()
        for tb in hl.tile(rows):
            lo = offsets[tb]
            n = offsets[tb.index + 1] - lo
            for tm in hl.tile(m):
                sq = hl.zeros([tb, tm], dtype=values.dtype)
                top = hl.full([tb, tm], float("-inf"), dtype=values.dtype)
                for tk in hl.jagged_tile(n):
                    at = (lo[:, None] + tk.index[None, :])[:, :, None] * m + tm.index[None, None, :]
                    v = hl.load(flat, [at])
                    sq = sq + ((v - 1.0) * (v - 1.0)).sum(dim=1)
                    top = torch.maximum(top, v.amax(dim=1))
                centered_sq[tb, tm] = sq
                peak[tb, tm] = top
            for tc in hl.jagged_tile(widths[tb]):
                stretched[tb, tc] = dense[tb, tc] * 3.0
        return centered_sq, peak, stretched
    """
)


def test_jagged_tile_masks_loads_stores_and_reductions_per_lane() -> None:
    """hl.jagged_tile(lanes) (upstream jagged_mean / jagged_sum / jagged_layer_norm): the loop runs to the
    longest lane and position k of lane i is valid below lanes[i]. An invalid position reads 0 (yet
    `(v - 1) ** 2` is 1 there: a reduction must leave it out, as must amax of values all below 0), a store
    leaves it alone, and a lane's loop over no rows reduces to the identity."""
    torch.manual_seed(0)
    offsets = torch.tensor([0, 3, 3, 10, 11, 19])  # rows of 3, 0, 7, 1 and 8: several blocks of 4
    values = -torch.rand(19, 6) - 0.5  # all negative: an invalid 0 would win an amax
    widths = torch.tensor([2, 0, 5, 8, 1], dtype=torch.int32)
    dense = torch.randn(5, 8)
    sq, peak, stretched = run_reference(JAGGED, "ragged_stats", [values, offsets, widths, dense], [2, 4, 4, 4])
    for i in range(5):
        rows = values[offsets[i]:offsets[i + 1]]
        torch.testing.assert_close(sq[i], ((rows - 1.0) ** 2).sum(0))
        torch.testing.assert_close(peak[i], rows.amax(0) if rows.numel() else torch.full([6], float("-inf")))
        w = int(widths[i])
        torch.testing.assert_close(stretched[i], torch.cat([dense[i, :w] * 3.0, dense[i, w:]]))


def test_jagged_tile_refuses_what_it_cannot_mask() -> None:
    """An op that mixes positions along the jagged axis and is not a reduction the reference masks (softmax
    over a ragged row) raises, naming it, rather than computing over the invalid positions."""
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def ragged_softmax(x, lengths):
            out = torch.zeros_like(x)
            for tb in hl.tile(x.size(0)):
                for tk in hl.jagged_tile(lengths[tb]):
                    out[tb, tk] = torch.softmax(x[tb, tk], dim=1)
            return out
        """
    )
    with pytest.raises(ReferenceRunError, match="cannot mask `softmax` along a jagged tile's axis"):
        run_reference(src, "ragged_softmax", [torch.randn(4, 8), torch.tensor([1, 8, 0, 3])], [2, 4])


def test_split_and_join_pair_up_a_last_dim_of_two() -> None:
    """hl.split / hl.join (upstream rope, blackwell_attention): join puts two tensors side by side on a new
    last dim of 2 (broadcast first), split takes such a dim apart."""
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def rotate_pairs(x, scale):
            out = torch.empty_like(x)
            for t in hl.tile(x.size(0)):
                first, second = hl.split(x[t, :, :])
                out[t, :, :] = hl.join(-second * scale[None, :], first)
            return out
        """
    )
    x, scale = torch.randn(6, 5, 2), torch.randn(5)
    out = run_reference(src, "rotate_pairs", [x, scale], [4])
    torch.testing.assert_close(out, torch.stack([-x[..., 1] * scale, x[..., 0]], -1))


def test_tiles_in_shapes_are_their_lengths() -> None:
    """A tile among the sizes of a reshape, view, expand or torch.zeros (upstream rope: `cos[tile_b, tile_t, :]
    .reshape([tile_b, tile_t, 2, half])`) is its block as the eager run holds it: `end - begin` elements,
    fewer in a partial last tile (7 rows in blocks of 4). hl.zeros keeps taking the tiles themselves."""
    src = _source(
        """
        import torch, helion, helion.language as hl

        @helion.kernel
        def halves_swapped(x):
            rows, cols = x.size()
            out = torch.empty_like(x)
            for t in hl.tile(rows):
                pairs = x[t, :].reshape([t, 2, cols // 2]).view(t, 2, cols // 2)
                zero = torch.zeros([t, cols], dtype=x.dtype) + hl.zeros([t, cols], dtype=x.dtype)
                out[t, :] = torch.cat([pairs[:, 1, :], pairs[:, 0, :]], dim=1) + zero.expand(t, cols)
            return out
        """
    )
    x = torch.randn(7, 6)
    out = run_reference(src, "halves_swapped", [x], [4])
    torch.testing.assert_close(out, torch.cat([x[:, 3:], x[:, :3]], dim=1))


def test_a_device_read_is_a_value_of_its_own_and_host_views_stay_views() -> None:
    # upstream mamba2_chunk_scan scales a loaded block in place (`cb_local *= decay`) for every head of a group:
    # Helion's load is a copy, so `cb` must stay as it was (the eager run compounded the scaling: off by 10^28)
    src = textwrap.dedent('''
        import torch
        import helion
        import helion.language as hl

        @helion.kernel()
        def scaled(cb: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
            flat = out[0]  # host code: a view of out, written through below
            for h in hl.grid(out.size(1)):
                for tile in hl.tile(cb.size(0)):
                    block = cb[tile]
                    block *= 2.0
                    flat[h, tile] = block
            return out
    ''')
    cb = torch.arange(8.0)
    out = torch.zeros(1, 3, 8)
    result = run_reference(src, "scaled", [cb, out], [4])
    torch.testing.assert_close(cb, torch.arange(8.0))  # every head read the block as it is in memory
    torch.testing.assert_close(result, (2 * torch.arange(8.0)).expand(1, 3, 8))  # written through the host view


RACY = textwrap.dedent('''
    import torch
    import helion
    import helion.language as hl

    @helion.kernel()
    def scatter(x: torch.Tensor, rows: torch.Tensor, count: int) -> torch.Tensor:
        out = torch.zeros_like(x)
        for tile in hl.tile(x.size(0)):
            valid = tile.index < count
            where = torch.where(valid, rows[tile], 0)  # masked rows sent to row 0, which rows[2] writes too
            out[where, :] = torch.where(valid[:, None], x[tile, :], out[where, :])
        return out
''')


def test_a_store_that_writes_an_element_twice_with_different_values_is_a_race() -> None:
    x = torch.arange(1.0, 17.0).reshape(8, 2)
    rows = torch.tensor([3, 1, 0, 2, 7, 6, 5, 4])
    with pytest.raises(ReferenceRunError, match=r"line 12: .*one store writes \[0, 0\] of \[8, 2\] twice \(5 and 0; 1 more\): a race"):
        run_reference(RACY, "scatter", [x, rows, 6], [8])
    full = run_reference(RACY, "scatter", [x, rows, 8], [8])  # every row written once: no race
    torch.testing.assert_close(full, torch.zeros(8, 2).index_copy(0, rows, x))
    same = RACY.replace("torch.where(valid[:, None], x[tile, :], out[where, :])", "x[tile, :] * 0 + 5.0")
    twice = run_reference(same.replace("out[where, :]", "out[where * 0, :]"), "scatter", [x, rows, 6], [8])
    # every row to row 0, the same value each time: no race
    assert twice[0].tolist() == [5.0, 5.0]
