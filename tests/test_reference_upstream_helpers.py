"""Upstream example files as the eager reference sees them: the constants they take from `helion._testing`,
kernels made by `@helion.aot_kernel` / `@helion.jit`, and an import line naming more than the kernel needs."""

from __future__ import annotations

import textwrap

import pytest
import torch

from compiler.frontend import host_models, upstream_names
from compiler.frontend.module import KERNEL_DECORATORS as FRONT_END_DECORATORS
from compiler.frontend.module import parse_module
from compiler.reference import ReferenceRunError, load_module, run_reference
from compiler.reference.prune import KERNEL_DECORATORS as REFERENCE_DECORATORS
from compiler.reference.upstream_testing import CONSTANTS


def _source(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


TESTING_NAMES = _source(
    """
    import torch
    import helion
    import helion.language as hl
    from helion._testing import DEVICE, HALF_DTYPE, LONG_INT_TYPE, run_example

    @helion.kernel
    def halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = x.size(0)
        out = torch.empty([n], dtype=HALF_DTYPE, device=DEVICE)
        rows = torch.empty([n], dtype=LONG_INT_TYPE, device=x.device)
        for tile in hl.tile(n):
            out[tile] = (x[tile] * 3).to(HALF_DTYPE)
            rows[tile] = tile.index.to(LONG_INT_TYPE)
        return out, rows
    """
)


def test_a_kernel_body_reads_upstreams_testing_constants_as_a_tpu_has_them() -> None:
    """HALF_DTYPE is bfloat16 and LONG_INT_TYPE int32 (a TPU's), DEVICE where the inputs are; the import line
    also names run_example, which the kernel does not read and the reference does not have."""
    x = torch.randn(10)
    out, rows = run_reference(TESTING_NAMES, "halves", [x], [4])
    assert out.dtype == torch.bfloat16 and out.device == x.device
    torch.testing.assert_close(out, (x * 3).to(torch.bfloat16))
    assert rows.dtype == torch.int32 and rows.tolist() == list(range(10))


def test_upstreams_harness_functions_are_not_in_the_eager_testing_module() -> None:
    """The whole file (not cut down to one kernel) imports run_example too: an error, not a stand-in."""
    with pytest.raises(ReferenceRunError, match="cannot import name 'run_example' from 'helion._testing'"):
        load_module(TESTING_NAMES)


@pytest.mark.parametrize("name", ["HALF_DTYPE", "LONG_INT_TYPE"])
def test_the_reference_and_the_front_end_give_the_same_dtype(name: str) -> None:
    """check compares the compiled program with the eager one: a name they read differently would make them
    two programs (a float16 reference against a bfloat16 kernel)."""
    qualified = f"helion._testing.{name}"
    assert CONSTANTS[name] == upstream_names.resolve(qualified) == host_models.resolve(qualified)


DECORATED = {
    "aot_kernel": ("import helion", "@helion.aot_kernel(batched=[[0, None]], static_shapes=False)"),
    "aot_kernel_bare": ("from helion import aot_kernel", "@aot_kernel"),
    "autotuner": ("from helion.autotuner import aot_kernel", "@aot_kernel()"),
    "experimental": ("from helion.experimental import aot_kernel", "@aot_kernel(key=lambda x: x.size(0))"),
    "jit": ("import helion", "@helion.jit(static_shapes=True)"),
}


def _decorated(case: str) -> str:
    imports, decorator = DECORATED[case]
    return (
        f"import torch\nimport helion\nimport helion.language as hl\n{imports}\n\n\n{decorator}\n"
        "def double_rows(x: torch.Tensor) -> torch.Tensor:\n"
        "    out = torch.empty_like(x)\n"
        "    for tile_m, tile_n in hl.tile(x.size()):\n"
        "        out[tile_m, tile_n] = x[tile_m, tile_n] * 2\n"
        "    return out\n"
    )


@pytest.mark.parametrize("case", DECORATED)
def test_aot_and_jit_decorators_make_kernels_for_both_sides(case: str) -> None:
    """upstream aot_example's sum_aot and aot_compile_example's add_2d were NOT CHECKED: no kernel of that
    name. Their tuning keys (key=, batched=) choose configs and never change what the kernel computes."""
    source = _decorated(case)
    x = torch.randn(6, 40)
    torch.testing.assert_close(run_reference(source, "double_rows", [x], [4, 16]), x * 2)
    whole = load_module(source)
    assert set(whole.kernels) == {"double_rows"}
    torch.testing.assert_close(whole.run("double_rows", [x]), x * 2)
    assert [k.name for k in parse_module(source).kernels] == ["double_rows"]


def test_the_reference_knows_the_front_ends_kernel_decorators() -> None:
    assert set(REFERENCE_DECORATORS) == set(FRONT_END_DECORATORS)


CHECKED = _source(
    """
    import torch
    import helion
    import helion.language as hl
    from helion._testing import HALF_DTYPE


    # helion: args(x=f32[16, 256])
    @helion.aot_kernel()
    def scaled_half(x: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty([m, n], dtype=HALF_DTYPE, device=x.device)
        for tile_m, tile_n in hl.tile([m, n]):
            out[tile_m, tile_n] = (x[tile_m, tile_n] * 0.5 + 1).to(HALF_DTYPE)
        return out
    """
)


def test_check_compares_an_aot_kernel_reading_half_dtype_with_the_eager_reference(tmp_path, capsys) -> None:
    from compiler.check import check_file

    path = tmp_path / "aot_half.py"
    path.write_text(CHECKED)
    code = check_file(str(path), None, "v7x", ["unroll"])
    out = capsys.readouterr().out
    row = out.splitlines()[1]
    assert code == 0 and row.split()[0] == "scaled_half" and " ok " in row and "NOT CHECKED" not in out, out


ALIASED = _source(
    """
    import torch
    import helion
    import helion.language as hl

    @helion.kernel(static_shapes=True)
    def shifted(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = x[tile] + 1
        return out

    def negated(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in hl.tile(x.size(0)):
            out[tile] = -x[tile]
        return out

    shifted_dynamic: object = helion.kernel(shifted.fn, configs=shifted.configs, static_shapes=False)
    negated_kernel = helion.kernel(negated)
    """
)


@pytest.mark.parametrize("name,expected", [("shifted_dynamic", lambda x: x + 1), ("negated_kernel", torch.neg)])
def test_a_kernel_made_by_calling_the_decorator_is_a_kernel_for_both_sides(name: str, expected) -> None:
    """upstream attention.py's `attention_dynamic = helion.kernel(attention.fn, configs=..., static_shapes=False)`
    compiles; the eager reference had no kernel of that name. Its settings are dropped like a decorator's."""
    x = torch.randn(11)
    torch.testing.assert_close(run_reference(ALIASED, name, [x], [4]), expected(x))
    assert name in {k.name for k in parse_module(ALIASED).kernels}


def test_check_says_mismatch_when_the_two_sides_give_an_output_different_dtypes(tmp_path, capsys, monkeypatch, without_libtpu) -> None:
    """Had the two sides read HALF_DTYPE differently (here the compiler as float16, upstream's interpret-mode
    value), the outputs would differ only in rounding, and check, casting one to the other, said ok."""
    from compiler.check import check_file

    monkeypatch.setitem(upstream_names.UPSTREAM_NAMES, "helion._testing.HALF_DTYPE", torch.float16)
    path = tmp_path / "aot_half.py"
    path.write_text(CHECKED)
    code = check_file(str(path), None, "v7x", ["unroll"])
    out = capsys.readouterr().out
    assert code == 1 and "MISMATCH" in out and "torch.float16, the eager run's is torch.bfloat16" in out, out
