"""f32 dots mean what the kernel asks for (compiler/frontend/dot_precision.py): a TPU's default f32 dot is one
bf16 pass (errors up to 0.16 against torch at upstream's test shapes on a v5e), so "tf32" is three bf16 passes
written out and "tf32x3" / "ieee" are Precision.HIGHEST; interpret mode computes exactly what the chip does."""

import textwrap

import pytest
import torch
from torch_check import HEADER, compile_for

from compiler import CompileError
from compiler.ir.chips import get_chip
from compiler.tune.model import estimate

MATMUL = """
    @helion.kernel({decorator})
    def mm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty([x.size(0), y.size(1)], dtype=torch.float32, device=x.device)
        for tm, tn in hl.tile([x.size(0), y.size(1)]):
            acc = hl.zeros([tm, tn], dtype=torch.float32)
            for tk in hl.tile(x.size(1)):
                acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
            out[tm, tn] = acc
        return out
"""
BLOCKS = {"block_sizes": [128, 128, 256]}


def _inputs(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(256, 512, generator=g).to(dtype), torch.randn(512, 256, generator=g).to(dtype)]


@pytest.mark.parametrize("decorator, env, spelled", [
    ("", None, "_dot_bf16x3("),
    ("dot_precision='tf32'", "ieee", "_dot_bf16x3("),  # the decorator wins over the environment
    ("dot_precision='ieee'", None, "precision=jax.lax.Precision.HIGHEST"),
    ("dot_precision='tf32x3'", None, "precision=jax.lax.Precision.HIGHEST"),
    ("", "ieee", "precision=jax.lax.Precision.HIGHEST"),
])
def test_an_f32_dot_names_the_precision_its_setting_asks_for(monkeypatch, decorator, env, spelled):
    if env:
        monkeypatch.setenv("HELION_DOT_PRECISION", env)
    ck = compile_for(MATMUL.format(decorator=decorator), _inputs(), BLOCKS)
    kernel_body = ck.source.split("def mm_kernel", 1)[1]
    assert spelled in kernel_body
    assert "Precision.DEFAULT" not in kernel_body.split("_dot_bf16x3(")[0]


def test_a_bf16_dot_stays_one_pass_and_says_so():
    ck = compile_for(MATMUL.format(decorator=""), _inputs(torch.bfloat16), BLOCKS)
    assert "_dot_bf16x3" not in ck.source and "precision=jax.lax.Precision.DEFAULT" in ck.source


def test_a_setting_that_is_no_precision_is_an_error_on_the_keyword():
    body = MATMUL.format(decorator="dot_precision='bf16'")
    with pytest.raises(CompileError, match="HPL109.*dot_precision must be one of") as info:
        compile_for(body, _inputs(), BLOCKS)
    rng = info.value.diagnostics[0].range
    line = (HEADER + textwrap.dedent(body)).splitlines()[rng.start.line]
    assert line[rng.start.character:rng.end.character] == "'bf16'"


def test_interpret_mode_computes_the_three_passes_the_chip_computes():
    """The result is neither torch's f32 product (interpret mode did the bf16 passes) nor one bf16 pass's
    (0.16-class errors): ~2**-16 of each product, far inside check's bounds."""
    x, y = _inputs()
    want = x @ y
    got = compile_for(MATMUL.format(decorator=""), [x, y], BLOCKS)(x, y)
    error = float((got - want).abs().max())
    one_pass = float((x.bfloat16().float() @ y.bfloat16().float() - want).abs().max())
    assert 0 < error < 2e-3 < one_pass / 10, (error, one_pass)
    exact = compile_for(MATMUL.format(decorator="dot_precision='ieee'"), [x, y], BLOCKS)(x, y)
    assert float((exact - want).abs().max()) < 1e-4


def test_the_model_charges_each_pass():
    v5e = get_chip("v5e")
    seconds = {}
    for name, decorator, dtype in (("bf16", "", torch.bfloat16), ("tf32", "", torch.float32),
                                   ("ieee", "dot_precision='ieee'", torch.float32)):
        ck = compile_for(MATMUL.format(decorator=decorator), _inputs(dtype), BLOCKS)
        assert ck.plan.dot_precisions == {"bf16": {"default"}, "tf32": {"bf16x3"}, "ieee": {"highest"}}[name]
        seconds[name] = estimate(ck.plan, v5e).seconds
    assert seconds["bf16"] < seconds["tf32"] < seconds["ieee"], seconds
