"""Module-level constants written as expressions (`_FP8_MAX = float(torch.finfo(_FP8_DTYPE).max)`) are read
statically by kernels (compiler/frontend/module_constants.py); editing one changes the kernel's source hash (the
key of stored results); a name bound to anything but plain data, or to a dtype TPUs lack, is a diagnostic on
the name. The values themselves are checked against torch by the conformance case
`module_constant_expressions`."""

import textwrap

import pytest
import torch

import compiler
from compiler.frontend.module import parse_module
from compiler.frontend.module_constants import evaluated_constants
from compiler.support.diagnostics import CompileError

SOURCE = '''
import torch
import helion
import helion.language as hl

_DT = torch.float8_e4m3fn
_BASE = 2 ** 7
_LIMIT = float(torch.finfo(_DT).max) / _BASE
_UNRELATED = 3 * 3
_W = torch.randn(4)
_ODD = torch.float8_e4m3fnuz


# helion: args(x=f32[16, 128])
@helion.kernel(static_shapes=True)
def scaled(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size()):
        out[t] = x[t] * _LIMIT
    return out


# helion: args(x=f32[16, 128])
@helion.kernel(static_shapes=True)
def reads_tensor(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size()):
        out[t] = x[t] * _W
    return out


# helion: args(x=f32[16, 128])
@helion.kernel(static_shapes=True)
def odd_dtype(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for t in hl.tile(x.size()):
        out[t] = x[t].to(_ODD).to(torch.float32)
    return out
'''


def _hash(source: str) -> str:
    return compiler.load(textwrap.dedent(source)).kernels["scaled"].source_hash


def test_evaluated_constants_are_plain_data_in_file_order():
    values = evaluated_constants(parse_module(SOURCE + "\n_BASE = 1\n"))
    assert values["_DT"] is torch.float8_e4m3fn
    assert values["_LIMIT"] == 448.0 / 128  # read before `_BASE` is rebound below
    assert values["_BASE"] == 1
    assert "_W" not in values  # a tensor is not a constant
    assert evaluated_constants(parse_module("import torch\nA = torch.iinfo(torch.int8).min\nB = (A, -A, 'x')\n")) \
        == {"A": -128, "B": (-128, 128, "x")}


def test_kernel_reads_the_value():
    kernel = compiler.load(SOURCE).kernels["scaled"]
    x = torch.randn(16, 128)
    torch.testing.assert_close(kernel.compile()(x), x * 3.5)


def test_editing_a_constant_it_reads_changes_the_source_hash():
    base = _hash(SOURCE)
    assert _hash(SOURCE.replace("_BASE = 2 ** 7", "_BASE = 2 ** 6")) != base  # read through `_LIMIT`
    assert _hash(SOURCE.replace("torch.finfo(_DT)", "torch.finfo(torch.bfloat16)")) != base
    assert _hash(SOURCE.replace("_UNRELATED = 3 * 3", "_UNRELATED = 3 * 4")) == base  # not read
    assert _hash(SOURCE.replace("_BASE = 2 ** 7", "_BASE = 2**7  # lanes")) == base  # formatting only


@pytest.mark.parametrize(("kernel", "code", "name"), [("reads_tensor", "HPL102", "_W"), ("odd_dtype", "HPL108", "_ODD")])
def test_names_that_are_not_device_constants_are_diagnosed_on_the_name(kernel, code, name):
    with pytest.raises(CompileError) as info:
        compiler.load(SOURCE).kernels[kernel].compile()
    (diag,) = [d for d in info.value.diagnostics if d.code == code]
    line = SOURCE.splitlines()[diag.range.start.line]
    assert line[diag.range.start.character:diag.range.end.character] == name
    assert name in diag.message
