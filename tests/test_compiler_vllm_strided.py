"""Strided and zero-size arguments (issue 40, item 2): shape sets say the layout users pass (`b.t()`,
`torch.empty_strided`), so host-code stride asserts hold or fail as in torch, and a zero-size dimension runs no
step. Kernels of our own in vLLM's style (tests/kernels/vllm_style/), never vLLM's."""

import pickle
import textwrap
from pathlib import Path

import pytest
import torch
from test_checks_libtpu import libtpu

import compiler
from compiler.check import check_rows
from compiler.ir.specs import SpecError, TensorSpec, parse_args_text, parse_spec
from compiler.reference.inputs import make_inputs
from compiler.reference.isolated import _dumps
from compiler.support.diagnostics import CompileError

KERNELS = Path(__file__).resolve().parent / "kernels" / "vllm_style"
HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"


@pytest.mark.parametrize("text,shape,strides", [
    ("f8e4m3[2048, 4096].t()", (4096, 2048), (1, 4096)),
    ("f32[3, 4].transpose(0, 1)", (4, 3), (1, 4)),
    ("f32[2, 3, 4].permute(2, 0, 1)", (4, 2, 3), (1, 12, 4)),
    ("i32[4, 16].strides(1, 4)", (4, 16), (1, 4)),
    ("i32[6, 2].strides(1, 8)", (6, 2), (1, 8)),
    ("f32[8, 4].strides(4, 1)", (8, 4), None),
    ("f32[0, 128]", (0, 128), None),
])
def test_a_shape_line_says_a_layout_and_prints_it_back(text, shape, strides) -> None:
    spec = parse_spec(text)
    assert isinstance(spec, TensorSpec) and (spec.shape, spec.strides) == (shape, strides)
    assert parse_spec(str(spec)) == spec
    assert spec.meta().stride() == (strides or torch.empty(shape).stride())


def test_layouts_print_as_users_make_them() -> None:
    assert str(TensorSpec("float32", (4, 8), torch.empty(8, 4).t().stride())) == "f32[8, 4].t()"
    assert str(TensorSpec("float32", (3, 4, 2), torch.empty(2, 3, 4).permute(1, 2, 0).stride())) \
        == "f32[2, 3, 4].permute(1, 2, 0)"
    assert str(TensorSpec("int32", (6, 2), (1, 8))) == "i32[6, 2].strides(1, 8)"


@pytest.mark.parametrize("text,why", [
    ("f32[4, 4].strides(1, 1)", "share memory"),
    ("f32[2, 3, 4].t()", "at most 2 dimensions"),
    ("f32[4, 4].permute(0, 0)", "not a permutation"),
    ("f32[4, 4].strides(1)", "one per dimension"),
    ("f32[-1, 4]", "must not be negative"),
])
def test_a_layout_torch_cannot_make_or_write_is_refused(text, why) -> None:
    with pytest.raises(SpecError, match=why):
        parse_args_text(f"x={text}")


STRIDE_ASSERT = HEADER + textwrap.dedent('''
    # helion: args(a=f32[16, 256], b={b})
    @helion.kernel()
    def tn_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, k = a.shape
        n = b.shape[1]
        assert b.stride(0) == 1
        assert not b.is_contiguous() and b.contiguous().stride() == (n, 1)
        out = torch.empty((m, n), dtype=torch.float32, device=a.device)
        for tile_m, tile_n in hl.tile([m, n]):
            acc = hl.zeros([tile_m, tile_n], torch.float32)
            for tile_k in hl.tile(k):
                acc = torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])
            out[tile_m, tile_n] = acc
        return out
''')


def test_a_transposed_shape_line_passes_the_stride_assert_and_runs() -> None:
    kernel = compiler.load(STRIDE_ASSERT.format(b="f32[128, 256].t()")).kernels["tn_mm"]
    ck = kernel.compile(chip="v5e")
    a, b = make_inputs(dict(ck.args))
    assert b.stride() == (1, 256)
    torch.testing.assert_close(ck(a, b), a @ b, rtol=1e-2, atol=1e-2)  # summation order differs
    with pytest.raises(ValueError, match="compile for this layout"):
        ck(a, b.contiguous())
    # the same kernel given a row-major b fails its assert, as torch would
    kernel = compiler.load(STRIDE_ASSERT.format(b="f32[256, 128]")).kernels["tn_mm"]
    with pytest.raises(CompileError) as err:
        kernel.compile(chip="v5e")
    (d,) = err.value.diagnostics
    assert d.code == "HPL113" and d.range.start.line == 10


def test_generator_cases_keep_the_transposed_weight_and_scales() -> None:
    kernel = compiler.load(str(KERNELS / "col_major_mm.py")).kernels["col_major_mm"]
    first = kernel.shape_sets[0]
    assert str(first["w"]) == "bf16[256, 256].t()" and str(first["w_scales"]) == "f32[2, 2].t()"
    ck = kernel.compile(chip="v5e", shape_set=0)
    x = torch.randn(8, 256).bfloat16()
    w = torch.randn(256, 256).bfloat16().t()
    scales = (0.5 + torch.rand(2, 2)).t()
    full = scales.repeat_interleave(128, 0).repeat_interleave(128, 1)
    want = (x.float() @ (w.float() * full)).bfloat16()
    torch.testing.assert_close(ck(x, w, scales).float(), want.float(), rtol=2e-2, atol=2e-2)


def test_empty_strided_scales_are_written_through_their_layout() -> None:
    kernel = compiler.load(str(KERNELS / "col_scales_quant.py")).kernels["col_scales_quant"]
    assert str(kernel.shape_sets[0]["scales"]) == "f32[2, 8].t()"
    ck = kernel.compile(chip="v5e", shape_set=0)
    x = torch.randn(8, 256).bfloat16()
    q = torch.empty(8, 256, dtype=torch.float8_e4m3fn)
    scales = torch.empty_strided((8, 2), (1, 8))
    ck(x, q, scales)
    groups = x.float().view(8, 2, 128)
    want = groups.abs().amax(dim=-1).clamp(min=1e-10) / 448.0
    assert scales.stride() == (1, 8)
    torch.testing.assert_close(scales, want)
    torch.testing.assert_close(q.float(), (groups / want[:, :, None]).view(8, 256).to(q.dtype).float(),
                               rtol=0.13, atol=1e-3)  # one float8 step: a division may round either way


@libtpu
@pytest.mark.parametrize("name", ["col_major_mm", "col_scales_quant"])
def test_strided_vllm_style_kernels_pass_check_against_their_baseline(name) -> None:
    report = check_rows(str(KERNELS / f"{name}.py"), name, "v5e", ["unroll", "emit_pipeline", "fori_loop"])
    assert report.rows and all(r.verdict == "ok" for r in report.rows), report.rows
    assert all(r.mine == "ok" for r in report.rows), report.rows


ZERO_SIZE = HEADER + textwrap.dedent('''
    # helion: args(x={x}, w={w})
    @helion.kernel()
    def row_dot(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty([m], dtype=torch.float32, device=x.device)
        for tile_m in hl.tile(m):
            acc = hl.zeros([tile_m], dtype=torch.float32)
            for tile_n in hl.tile(n):
                acc = acc + (x[tile_m, tile_n] * w[tile_n][None, :]).sum(-1)
            out[tile_m] = acc
        return out
''')


@pytest.mark.parametrize("x,w", [("f32[0, 128]", "f32[128]"), ("f32[16, 0]", "f32[0]")])
def test_a_zero_size_dimension_runs_no_step(x, w) -> None:
    ck = compiler.load(ZERO_SIZE.format(x=x, w=w)).kernels["row_dot"].compile(chip="v5e")
    a, b = make_inputs(dict(ck.args))
    torch.testing.assert_close(ck(a, b), (a * b[None, :]).sum(-1))


def test_fp8_arguments_keep_their_strides_on_the_way_to_the_reference_process() -> None:
    t = torch.randn(4, 8).to(torch.float8_e4m3fn).t()
    back = pickle.loads(_dumps(t))
    assert back.stride() == (1, 8) and torch.equal(back.float(), t.float())


BROADCAST_TILES = HEADER + textwrap.dedent('''
    # helion: args(x=f32[16, 256], w=f32[128, 256].t())
    @helion.kernel()
    def swapped_mm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m, k = x.shape
        n = w.shape[1]
        assert w.stride(0) == 1
        out = torch.empty((m, n), dtype=torch.float32, device=x.device)
        for tile_m, tile_n in hl.tile([m, n]):
            acc = hl.zeros([tile_m, tile_n], torch.float32)
            for tile_k in hl.tile(k):
                xt = hl.load(x, [tile_m.index[None, :], tile_k.index[:, None]])
                wt = hl.load(w, [tile_k.index[None, :], tile_n.index[:, None]])
                acc = acc + hl.dot(wt, xt).t()
            out[tile_m, tile_n] = acc
        return out
''')


def test_tile_positions_broadcast_against_each_other_read_the_block_transposed() -> None:
    """vLLM's block-scaled matmul reads `hl.load(a, [tile_m.index[None, :], tile_k.index[:, None]])`: the block
    a[tile_m, tile_k] transposed, not a two-dimensional gather (which was HPL202)."""
    ck = compiler.load(BROADCAST_TILES).kernels["swapped_mm"].compile(chip="v5e", config={"block_sizes": [8, 128, 128]})
    assert "gather" not in ck.source
    x, w = make_inputs(dict(ck.args))
    torch.testing.assert_close(ck(x, w), x @ w, rtol=1e-2, atol=1e-2)
