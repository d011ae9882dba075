"""vLLM's MLA decode and nvfp4 op files on a TPU (issue 40): what their kernels, as written, got wrong in this
tool, on kernels of our own written in vLLM's style (tests/kernels/vllm_style/)."""

from pathlib import Path

import pytest

import compiler
from compiler.support.diagnostics import CompileError

KERNELS = Path(__file__).resolve().parent / "kernels" / "vllm_style"


def test_a_generator_of_packed_fp4_tensors_gives_one_error_on_the_kernel_naming_the_type() -> None:
    """vLLM's nvfp4 kernels: every case passes `torch.float4_e2m1fn_x2` tensors (made on `DEVICE = "cuda" if
    torch.cuda.is_available() else "cpu"`). One diagnostic, on the `def` line, naming the type: before, a warning
    that the argument was "not known without running the file" and an HPL107 hint that "nothing in this file
    calls it"."""
    module = compiler.load(str(KERNELS / "fp4_dot.py"))
    kernel = module.kernels["fp4_row_sums"]
    assert not kernel.shape_sets
    assert not [d for d in module.diagnostics if d.code in ("HPL107", "HPL112")], module.diagnostics
    with pytest.raises(CompileError) as raised:
        kernel.compile(chip="v5e")
    (d,) = raised.value.diagnostics
    assert d.code == "HPL203" and d.severity.name == "ERROR"
    assert (d.range.start.line, d.range.start.character) == (23, 0)  # `def fp4_row_sums(`
    assert "`packed` as torch.float4_e2m1fn_x2" in d.message and "no fp4 storage type" in d.message
