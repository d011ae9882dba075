"""Every argument kind a Helion kernel takes can be said on a shape line: tensors, numbers, bools, None,
lists and tuples of ints, dtypes; a bad argument is one precise diagnostic on that argument."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import compiler
from compiler.ir.specs import DtypeSpec, SpecError, TensorSpec, format_args, parse_args_text

LAYER_NORM = textwrap.dedent('''\
    import torch
    import helion
    import helion.language as hl


    # helion: args(ARGS)
    @helion.kernel
    def layer_norm_fwd(
        x: torch.Tensor,
        normalized_shape: list[int],
        weight: torch.Tensor,
        bias: torch.Tensor | None = None,
        eps: float = 1e-5,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        m, n = x.size()
        assert len(normalized_shape) == 1 and normalized_shape[0] == n
        out = torch.empty([m, n], dtype=x.dtype, device=x.device)
        mean = torch.empty([m], dtype=torch.float32, device=x.device)
        rstd = torch.empty([m], dtype=torch.float32, device=x.device)
        for tile_m in hl.tile(m):
            acc = x[tile_m, :].to(torch.float32)
            mu = torch.sum(acc, dim=-1) / normalized_shape[0]
            centered = acc - mu[:, None]
            r = torch.rsqrt(torch.sum(centered * centered, dim=-1) / n + eps)
            y = centered * r[:, None] * weight[:].to(torch.float32)
            if bias is not None:
                y = y + bias[:].to(torch.float32)
            out[tile_m, :] = y.to(x.dtype)
            mean[tile_m] = mu
            rstd[tile_m] = r
        return out, mean, rstd
''')


def test_every_argument_kind_parses_and_round_trips():
    text = ("x=bf16[8, 128], shape=[8192], dims=(1, -1), none=None, flag=True, off=False, n=7, eps=1e-5, "
            "dt=torch.bfloat16, short=f32")
    specs = parse_args_text(text)
    assert specs == {"x": TensorSpec(torch.bfloat16, (8, 128)), "shape": [8192], "dims": (1, -1), "none": None,
                     "flag": True, "off": False, "n": 7, "eps": 1e-5, "dt": DtypeSpec("bfloat16"),
                     "short": DtypeSpec("float32")}
    assert specs["dt"].dtype is torch.bfloat16
    assert parse_args_text(format_args(specs)) == specs


def test_a_0d_tensor_is_written_like_torch_prints_its_shape():
    specs = parse_args_text("s=f32[], t=bf16[ ], u=i32[()], x=f32[8, 128]")
    assert specs == {"s": TensorSpec(torch.float32, ()), "t": TensorSpec(torch.bfloat16, ()),
                     "u": TensorSpec(torch.int32, ()), "x": TensorSpec(torch.float32, (8, 128))}
    assert format_args(specs) == "s=f32[], t=bf16[], u=i32[], x=f32[8, 128]"
    assert parse_args_text(format_args(specs)) == specs
    assert compiler.ir.specs.parse_spec("f32[]") == TensorSpec(torch.float32, ())
    assert parse_args_text("normalized_shape=[]") == {"normalized_shape": []}  # an empty list stays a list


@pytest.mark.parametrize("args, bad, words", [
    ("normalized_shape=[8192, 1.5]", "1.5", "hold integers"),
    ("eps=f32[], weight=bf16[ ], normalized_shape=[8192, 1.5]", "1.5", "hold integers"),  # columns after `[]`
    ("dt=torch.nope", "torch.nope", "is not a dtype"),
    ("x=bf16[8, n]", "n", "integer literals"),
    ("name='rows'", "'rows'", "unsupported argument value"),
    ("fn=print", "print", "expected a tensor spec"),  # a name, not a value (lambdas are values: functions)
])
def test_a_bad_argument_is_one_diagnostic_on_that_argument(args, bad, words):
    text = LAYER_NORM.replace("ARGS", args)
    m = compiler.load(text)
    (diag,) = m.diagnostics
    line = text.splitlines()[diag.range.start.line]
    assert diag.code == "HPL104" and words in diag.message, diag
    assert line[diag.range.start.character:diag.range.end.character] == bad
    # compiling says the same, and nothing about a missing shape line (HPL107)
    with pytest.raises(compiler.CompileError) as info:
        m.kernels["layer_norm_fwd"].compile()
    assert [d.code for d in info.value.diagnostics] == ["HPL104"]
    with pytest.raises(SpecError):
        parse_args_text(args)


@pytest.mark.parametrize("bias", ["bias=bf16[8192], ", "bias=None, ", ""])
def test_layer_norm_fwd_with_a_list_argument_compiles(bias):
    args = f"x=bf16[256, 8192], normalized_shape=[8192], weight=bf16[8192], {bias}eps=1e-5"
    m = compiler.load(LAYER_NORM.replace("ARGS", args))
    assert m.diagnostics == []
    kernel = m.kernels["layer_norm_fwd"]
    assert kernel.shape_sets[0]["normalized_shape"] == [8192]
    ck = kernel.compile()
    assert not [d for d in ck.diagnostics if d.is_error], ck.diagnostics
    assert "normalized_shape" in ck.source  # passed through to the generated function like any scalar


def test_the_cli_shows_the_bad_argument_not_a_missing_shape_line(tmp_path):
    path = tmp_path / "ln.py"
    path.write_text(LAYER_NORM.replace("ARGS", "x=bf16[256, 8192], normalized_shape=[8192, 1.5], weight=bf16[8192]"))
    done = subprocess.run([sys.executable, "-m", "compiler.cli", "compile", str(path), "--emit", "vmem"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "HPL104" in done.stderr and "HPL107" not in done.stderr, done.stderr
    assert done.stderr.count("HPL104") == 1


def test_the_generated_code_takes_the_list_none_and_defaults_and_lowers():
    # bias left to its default None and eps to 1e-5: the compiled kernel is called with every parameter
    m = compiler.load(LAYER_NORM.replace("ARGS", "x=f32[16, 256], normalized_shape=[256], weight=f32[256]"))
    ck = m.kernels["layer_norm_fwd"].compile()
    assert list(ck.args) == ["x", "normalized_shape", "weight", "bias", "eps"]
    assert ck.check_lowering() == []
    x, w = torch.randn(16, 256), torch.randn(256)
    out, mean, rstd = ck(x, [256], w, None, 1e-5)
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, [256], w, None, 1e-5), atol=2e-4, rtol=2e-4)
    torch.testing.assert_close(mean, x.mean(-1))


def test_a_dtype_argument_reaches_the_kernel_as_a_torch_dtype():
    text = textwrap.dedent('''\
        import torch
        import helion
        import helion.language as hl


        # helion: args(x=f32[16, 128], dt=torch.bfloat16)
        @helion.kernel()
        def cast(x: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
            out = torch.empty(x.size(), dtype=dt, device=x.device)
            for tile in hl.tile(x.size()):
                out[tile] = x[tile].to(dt)
            return out
    ''')
    ck = compiler.load(text).kernels["cast"].compile()
    x = torch.randn(16, 128)
    assert ck(x, torch.bfloat16).dtype == torch.bfloat16


BOOL_FLAG = '''
import torch
import helion
import helion.language as hl


@helion.kernel(static_shapes=True)
def maybe_double(x: torch.Tensor, flag: bool = True) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size(0)):
        if flag:
            out[t, :] = x[t, :] * 2.0
        else:
            out[t, :] = x[t, :]
    return out
'''


@pytest.mark.parametrize("flag", [True, False])
def test_a_bool_given_as_spec_text_is_the_bool_the_call_passes(flag):
    """Spec text "True" (a SMALL dict, a harness's args) is the constant True, not the string 'True': the call
    with True was refused ("compiled for the constant 'True', called with True")."""
    kernel = compiler.load(BOOL_FLAG).kernels["maybe_double"]
    ck = kernel.compile(args={"x": "f32[16, 128]", "flag": str(flag)}, chip="v5e")
    assert ck.args["flag"] is flag
    x = torch.randn(16, 128)
    torch.testing.assert_close(ck(x, flag), x * 2.0 if flag else x)
