"""Helpers a kernel file imports from other files of its package (vLLM's `get_fp8_dtype()`,
`get_fp8_min_max()`, `_, _FP8_MAX = ...` at module level) are read statically across files, with vLLM's
platform as the TPU being compiled for (compiler/frontend/workspace_imports.py, vllm_platform.py); the eager
reference executes the same helpers (compiler/reference/workspace.py); the files read are listed for the
keys of remembered results (`Module.followed_files`)."""

import os
import textwrap

import pytest
import torch

import compiler
from compiler.check import check_rows
from compiler.support.diagnostics import CompileError

UTILS = '''
import torch
from vllm.platforms import current_platform
from mypkg.logging_setup import init_logger  # never needed by the helpers: not followed into

logger = init_logger(__name__)


def fp8_type() -> torch.dtype:
    return current_platform.fp8_dtype()


def fp8_bounds() -> tuple[float, float]:
    if current_platform.is_fp8_fnuz():
        return -224.0, 224.0
    info = torch.finfo(current_platform.fp8_dtype())
    return info.min, info.max


def int8_bounds() -> tuple[int, int]:
    t = torch.iinfo(torch.int8)
    return t.min, t.max


def scaled(value: float, by: int) -> float:
    return value / by
'''

KERNELS = '''
import torch
import helion
import helion.language as hl

from ..utils import fp8_bounds, fp8_type
from mypkg.kernels.utils import int8_bounds, scaled
from mypkg.missing import nowhere

_, _QMAX = fp8_bounds()
_IMIN, _IMAX = int8_bounds()


# helion: args(x=bf16[32, 256])
@helion.kernel()
def fp8_quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n = x.shape
    hl.specialize(n)
    out = torch.empty([m, n], dtype=fp8_type(), device=x.device)
    scale = torch.empty([m, 1], dtype=torch.float32, device=x.device)
    for tm in hl.tile(m):
        blk = x[tm, :].to(torch.float32)
        s = torch.amax(torch.abs(blk), dim=-1).clamp(min=1e-6) / _QMAX
        out[tm, :] = (blk / s[:, None]).clamp(-_QMAX, _QMAX).to(out.dtype)
        scale[tm, 0] = s
    return out, scale


# helion: args(x=f32[32, 256])
@helion.kernel()
def int8_quant(x: torch.Tensor) -> torch.Tensor:
    lo, hi = int8_bounds()
    out = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    for tm in hl.tile(x.size(0)):
        out[tm, :] = (x[tm, :] * scaled(float(hi), 2)).round().clamp(lo, hi).to(torch.int8)
    return out


# helion: args(x=f32[32, 256])
@helion.kernel()
def unknown_helper(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in hl.tile(x.size(0)):
        out[tm, :] = x[tm, :] * nowhere()
    return out
'''


@pytest.fixture()
def workspace(tmp_path):
    """A package in vLLM's layout: helpers in mypkg/kernels/utils.py, kernels in mypkg/kernels/ops/quant.py."""
    ops = tmp_path / "mypkg" / "kernels" / "ops"
    ops.mkdir(parents=True)
    for d in (tmp_path / "mypkg", tmp_path / "mypkg" / "kernels", ops):
        (d / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "kernels" / "utils.py").write_text(textwrap.dedent(UTILS))
    (ops / "quant.py").write_text(textwrap.dedent(KERNELS))
    return tmp_path


@pytest.mark.parametrize(("chip", "dtype", "qmax"), [("v5e", "float8_e4m3fn", 448.0), ("v6e", "float8_e5m2", 57344.0)])
def test_helpers_across_files_follow_the_chip(workspace, chip, dtype, qmax) -> None:
    module = compiler.load(str(workspace / "mypkg" / "kernels" / "ops" / "quant.py"))
    ck = module.kernels["fp8_quant"].compile(chip=chip)
    assert f"jnp.{dtype}" in ck.source or f"torch.{dtype}" in ck.source or dtype in ck.source
    other = "float8_e5m2" if dtype == "float8_e4m3fn" else "float8_e4m3fn"
    assert other not in ck.source
    assert repr(qmax) in ck.source or str(int(qmax)) in ck.source or f"{1 / qmax!r}" in ck.source


def test_int8_bounds_and_a_helper_with_constant_arguments(workspace) -> None:
    module = compiler.load(str(workspace / "mypkg" / "kernels" / "ops" / "quant.py"))
    ck = module.kernels["int8_quant"].compile(chip="v5e")
    assert "63.5" in ck.source  # scaled(127.0, 2)
    x = torch.randn(32, 256)
    got = ck(x)
    assert torch.equal(got, (x * 63.5).round().clamp(-128, 127).to(torch.int8))


def test_a_name_from_a_module_not_in_the_workspace_is_one_diagnostic(workspace) -> None:
    module = compiler.load(str(workspace / "mypkg" / "kernels" / "ops" / "quant.py"))
    with pytest.raises(CompileError) as info:
        module.kernels["unknown_helper"].compile(chip="v5e")
    (diag,) = info.value.diagnostics
    assert diag.code == "HPL102" and "`nowhere` comes from `mypkg.missing`" in diag.message
    assert diag.range.start.line == textwrap.dedent(KERNELS).splitlines().index(
        "        out[tm, :] = x[tm, :] * nowhere()")


def test_followed_files_are_listed_without_torch(workspace) -> None:
    module = compiler.load(str(workspace / "mypkg" / "kernels" / "ops" / "quant.py"))
    utils = os.path.abspath(workspace / "mypkg" / "kernels" / "utils.py")
    assert module.followed_files == (utils,)
    assert module.kernels["fp8_quant"].followed_files == (utils,)
    assert compiler.load(textwrap.dedent(KERNELS)).followed_files == ()  # source text alone: nowhere to look


def test_editing_a_helper_changes_what_the_kernel_compiles(workspace) -> None:
    path = str(workspace / "mypkg" / "kernels" / "ops" / "quant.py")
    utils = workspace / "mypkg" / "kernels" / "utils.py"
    utils.write_text(textwrap.dedent(UTILS).replace("return t.min, t.max", "return -100, 100"))
    os.utime(utils, ns=(1, 1))  # a new stamp even within the file system's time resolution
    ck = compiler.load(path).kernels["int8_quant"].compile(chip="v5e")
    assert "50.0" in ck.source


def test_check_runs_the_reference_through_the_same_helpers(workspace) -> None:
    report = check_rows(str(workspace / "mypkg" / "kernels" / "ops" / "quant.py"), "fp8_quant", "v5e", ["unroll"])
    (row,) = report.rows
    assert row.verdict == "ok", row


GENERATOR_UTILS = '''
import torch


def case_widths() -> list[int]:
    return [256, 512]


def fp8_bounds() -> tuple[float, float]:
    info = torch.finfo(torch.float8_e4m3fn)
    return info.min, info.max
'''

GENERATOR_KERNEL = '''
from typing import Any

import helion.language as hl
import torch
from vllm.kernels.helion.register import register_kernel

from ..cases import case_widths, fp8_bounds


def make_cases() -> dict[str, Any]:
    lo, hi = fp8_bounds()
    cases = {}
    for width in case_widths():
        x = torch.randn(8, width, device="cuda", dtype=torch.bfloat16)
        cases[f"width_{width}"] = (x, lo, hi)
    return cases


@register_kernel(input_generator=make_cases)
def clamp_rows(x: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tm in hl.tile(x.size(0)):
        out[tm, :] = torch.clamp(x[tm, :], lo, hi)
    return out
'''


def test_an_input_generator_reads_its_helpers_from_their_workspace_file(tmp_path) -> None:
    """The generator's helpers (`case_widths()`, `fp8_bounds()`, in no model of vLLM's helpers) are read from the
    workspace file as a kernel's are: one mechanism for both."""
    ops = tmp_path / "mypkg" / "kernels" / "ops"
    ops.mkdir(parents=True)
    for d in (tmp_path / "mypkg", tmp_path / "mypkg" / "kernels", ops):
        (d / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "kernels" / "cases.py").write_text(textwrap.dedent(GENERATOR_UTILS))
    (ops / "clamp.py").write_text(textwrap.dedent(GENERATOR_KERNEL))
    kernel = compiler.load(str(ops / "clamp.py")).kernels["clamp_rows"]
    assert [o.case_label for o in kernel.shape_set_origins] == ["width_256", "width_512"]
    assert [(str(s["x"]), s["lo"], s["hi"]) for s in kernel.shape_sets] == [
        ("bf16[8, 256]", -448.0, 448.0), ("bf16[8, 512]", -448.0, 448.0)]
