"""A shape set whose arrays do not fit the chip's HBM (HPL303): said once at compile, on the shape set's line,
with the figures libtpu gives (its 'available HBM' per chip), and by the tuner before any search."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES

import compiler
from compiler.ir.chips import get_chip
from compiler.support.diagnostics import CompileError
from compiler.tpu.libtpu_compile import classify_compile_error
from compiler.tpu.truth import compile_code
from compiler.tune.evaluators import Problem

SOURCE = (EXAMPLES / "attention.py").read_text()
GiB = 1024**3


def _hbm(ck: compiler.CompiledKernel) -> list:
    return [d for d in ck.diagnostics if d.code == "HPL303"]


def test_attention_32k_does_not_fit_a_v5e_and_fits_a_v7x() -> None:
    kernel = compiler.load(SOURCE).kernels["attention"]
    (diag,) = _hbm(kernel.compile(shape_set=1, chip="v5e"))
    assert diag.is_error
    assert diag.range == kernel.shape_set_ranges[1]  # the 32k shape line
    # q, k, v and the output, 4 GiB each: libtpu's "HLO temporaries (16.00G) exceeds available HBM (15.75G)"
    assert diag.data == {"hbm_bytes": 16 * GiB, "hbm_capacity_bytes": int(15.75 * GiB)}
    assert "16.00 GiB" in diag.message and "15.75 GiB" in diag.message and "out 4.00 GiB" in diag.message
    assert not _hbm(kernel.compile(shape_set=1, chip="v7x"))  # 94.75 GiB
    assert not _hbm(kernel.compile(shape_set=0, chip="v5e"))  # 8k: 4 GiB in all


def test_a_view_takes_no_hbm_of_its_own() -> None:
    # attention reshapes q, k and v into q_flat, k_flat, v_flat on the host: counted once each, as libtpu does
    kernel = compiler.load(SOURCE).kernels["attention"]
    (diag,) = _hbm(kernel.compile(shape_set=1, chip="v5e"))
    assert "flat" not in diag.message


def test_the_tpu_compilers_hbm_failure_is_the_same_code() -> None:
    message = ("RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO temporaries "
               "(16.00G) exceeds available HBM (15.75G).")
    kind = classify_compile_error(message)["kind"]
    assert kind == "hbm_oom" and compile_code(kind) == "HPL303"


def test_the_tuner_says_it_once_before_searching() -> None:
    kernel = compiler.load(SOURCE).kernels["attention"]
    problem = Problem(SOURCE, "attention", kernel.shape_sets[1], "v5e", str(EXAMPLES / "attention.py"), 1)
    with pytest.raises(CompileError) as raised:
        problem.require_hbm()
    assert [d.code for d in raised.value.diagnostics] == ["HPL303"]
    Problem(SOURCE, "attention", kernel.shape_sets[1], "v7x").require_hbm()  # fits: nothing raised


def test_every_chip_has_the_hbm_libtpu_gives_it() -> None:
    assert {c: get_chip(c).hbm_capacity_bytes / GiB for c in ("v4", "v5e", "v5p", "v6e", "v7x")} == pytest.approx(
        {"v4": 15.25, "v5e": 15.75, "v5p": 95.74, "v6e": 31.25, "v7x": 94.75}, abs=0.01)
