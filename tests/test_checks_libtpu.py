"""Deviceless libtpu compiles of hand-written Pallas modules (skipped when libtpu is not installed)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from conftest import child_pythonpath

from compiler.ir.chips import get_chip
from compiler.tpu.libtpu_compile import TpuCompiler, libtpu_available
from compiler.tpu.lowering import lower_check


def libtpu(test):
    """Mark a test as needing the libtpu wheel; skipped when it is not installed."""
    skip = pytest.mark.skipif(not libtpu_available(), reason="libtpu is not installed")
    return pytest.mark.libtpu(skip(test))


CHIPS = ["v5e", "v7x"]
S = jax.ShapeDtypeStruct
REPO = Path(__file__).resolve().parents[1]

ADD = """
import jax
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y, *, interpret=False, bm=BM, bn=BN):
    spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // bm, x.shape[1] // bn),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=interpret,
    )(x, y)
"""

MATMUL = """
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def mm_kernel(a_ref, b_ref, o_ref):
    acc = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = jnp.exp(acc).astype(o_ref.dtype)


def mm(a, b, *, interpret=False):
    m, k = a.shape
    n = b.shape[1]
    return pl.pallas_call(
        mm_kernel,
        grid=(m // 128, n // 128),
        in_specs=[pl.BlockSpec((128, k), lambda i, j: (i, 0)), pl.BlockSpec((k, 128), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        interpret=interpret,
    )(a, b)
"""

ELEMENTWISE = """
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def k(x_ref, o_ref):
    o_ref[...] = BODY


def f(x, *, interpret=False):
    return pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(OUT, x.dtype), interpret=interpret)(x)
"""

UNALIGNED = """
import jax
from jax.experimental import pallas as pl


def k(x_ref, o_ref):
    i = pl.program_id(0)
    o_ref[...] = x_ref[:, pl.ds(i * 64, 128)]


def f(x, *, interpret=False):
    return pl.pallas_call(
        k,
        grid=(2,),
        in_specs=[pl.BlockSpec((8, 512), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, i)),
        out_shape=jax.ShapeDtypeStruct((8, 256), x.dtype),
        interpret=interpret,
    )(x)
"""

SCALE = """
import jax
from jax.experimental import pallas as pl


def scale(x, factor, *, interpret=False):
    def scale_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * factor

    return pl.pallas_call(scale_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret)(x)
"""


def add_source(bm: int, bn: int) -> str:
    return ADD.replace("BM", str(bm)).replace("BN", str(bn))


def elementwise(body: str, out: tuple[int, ...]) -> str:
    return ELEMENTWISE.replace("BODY", body).replace("OUT", repr(out))


def line_in(source: str, text: str) -> int:
    """1-based line of `source` containing `text`."""
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


def load_callable(source: str, entry: str, tmp_path: Path):
    path = tmp_path / "mod.py"
    path.write_text(source)
    namespace: dict = {}
    exec(compile(source, str(path), "exec"), namespace)
    return namespace[entry]


@pytest.fixture(scope="module")
def compiler():
    with TpuCompiler(timeout=120) as c:
        yield c


@libtpu
@pytest.mark.parametrize("chip", CHIPS)
def test_add_compiles_with_counts_and_vmem(compiler, chip):
    f32 = S((16, 256), jnp.float32)
    result = compiler.compile(add_source(8, 128), "add", [f32, f32], get_chip(chip), filename="add.py")
    assert result.ok and result.stage == "compile" and result.kind is None
    [kernel] = result.kernels
    assert kernel.name == "add_kernel" and kernel.last_pass == "finalize-llo" and kernel.failed_pass is None
    # one (8, 128) f32 tile per block: two loads, one add, one store per grid step
    assert kernel.categories["vector_load"] == 2
    assert kernel.categories["vector_store"] == 1
    assert kernel.op_counts["llo.vadd.f32"] == 1
    assert kernel.categories["matmul"] == 0
    assert "func.func @add_kernel" in kernel.mosaic and "loc(" not in kernel.mosaic
    assert "llo.vadd.f32" in kernel.final
    assert 0 < result.vmem_used_bytes <= 3 * 2 * 8 * 128 * 4


@libtpu
def test_repeated_compiles_each_get_their_dump(compiler):
    f32 = S((16, 256), jnp.float32)
    first = compiler.compile(add_source(8, 128), "add", [f32, f32], get_chip("v5e"))
    again = compiler.compile(add_source(8, 128), "add", [f32, f32], get_chip("v5e"), dump_mosaic=False)
    assert first.ok and again.ok
    assert len(again.kernels) == 1 and again.kernels[0].mosaic == ""
    assert again.kernels[0].op_counts == first.kernels[0].op_counts


@libtpu
@pytest.mark.parametrize("chip", CHIPS)
def test_matmul_counts_mxu_and_transcendental_ops(compiler, chip):
    bf16 = S((512, 512), jnp.bfloat16)
    result = compiler.compile(MATMUL, "mm", [bf16, bf16], get_chip(chip))
    assert result.ok
    assert result.categories["matmul"] > 0
    assert result.categories["matmul_result"] > 0
    assert result.categories["transcendental"] > 0
    assert "tpu.matmul" in result.kernels[0].mosaic


@libtpu
@pytest.mark.parametrize("chip", CHIPS)
def test_vmem_oom_passes_lowering_but_not_libtpu(compiler, chip, tmp_path):
    source, shape, block = add_source(1024, 2048), (4096, 4096), (1024, 2048)
    args = [S(shape, jnp.float32)] * 2
    assert lower_check(load_callable(source, "add", tmp_path), args, get_chip(chip)).ok
    result = compiler.compile(source, "add", args, get_chip(chip))
    assert not result.ok and result.stage == "compile" and result.kind == "vmem_oom"
    assert "vmem" in result.key_line.lower()
    # two inputs and one output, each double-buffered
    assert result.numbers["requested_bytes"] == 3 * 2 * block[0] * block[1] * 4
    assert result.oom_limit == "scoped"
    assert result.numbers["limit_bytes"] == get_chip(chip).default_scoped_vmem_bytes


@libtpu
def test_vmem_over_capacity_lists_allocations(compiler):
    args = [S((4096, 4096), jnp.float32)] * 2
    result = compiler.compile(add_source(2048, 2048), "add", args, get_chip("v7x"))
    assert result.kind == "vmem_oom" and result.oom_limit == "capacity"
    assert result.numbers["limit_bytes"] == get_chip("v7x").vmem_capacity_bytes
    kinds = sorted((a.operand_kind, a.operand_index) for a in result.allocations)
    assert kinds == [("input", 0), ("input", 1), ("output", 0)]
    assert all(a.window == "f32[2048,2048]" and a.buffers == 2 for a in result.allocations)


@libtpu
@pytest.mark.parametrize("chip", CHIPS)
def test_unaligned_dynamic_slice_is_located(compiler, chip):
    result = compiler.compile(UNALIGNED, "f", [S((8, 512), jnp.float32)], get_chip(chip), filename="gen.py")
    assert result.kind == "alignment"
    assert "multiple of 128" in result.key_line
    assert result.mosaic_op == "tpu.vector_load"
    assert result.location.file == "gen.py"
    assert result.location.line == line_in(UNALIGNED, "pl.ds(i * 64, 128)")


@libtpu
def test_unsupported_shape_cast_is_a_vector_layout_error(compiler):
    source = elementwise("x_ref[...].reshape(16, 24)", (16, 24))
    result = compiler.compile(source, "f", [S((8, 48), jnp.float32)], get_chip("v5e"), filename="gen.py")
    assert result.kind == "vector_layout"
    assert result.failed_pass == "infer-vector-layout"
    assert result.location.line == line_in(source, "reshape")


@libtpu
def test_f16_is_an_unsupported_dtype_on_v5e(compiler):
    source = elementwise("x_ref[...] * 2", (16, 128))
    result = compiler.compile(source, "f", [S((16, 128), jnp.float16)], get_chip("v5e"))
    assert result.kind == "unsupported_dtype"
    assert "Invalid vector type" in result.key_line


@libtpu
def test_load_and_lowering_failures_are_results(compiler):
    args = [S((16, 256), jnp.float32)] * 2
    missing = compiler.compile(add_source(8, 128), "nope", args, get_chip("v5e"))
    assert missing.stage == "load" and missing.exception_type == "AttributeError"
    bad_block = compiler.compile(add_source(8, 100), "add", args, get_chip("v5e"))
    assert bad_block.stage == "lowering" and "divisible by 8 and 128" in bad_block.error


@libtpu
def test_python_scalar_args_are_static(compiler):
    result = compiler.compile(SCALE, "scale", [S((8, 128), jnp.float32), 3.5], get_chip("v7x"))
    assert result.ok
    assert "3.500000e+00" in result.kernels[0].mosaic


@libtpu
def test_worker_crash_and_timeout_recover():
    """A worker that dies is a crash, one that does not answer in time a timeout; the next compile works."""
    f32 = S((16, 256), jnp.float32)
    with TpuCompiler(timeout=120) as compiler:
        crash = compiler.compile("import os\nos._exit(7)\n", "f", [f32], get_chip("v5e"))
        assert crash.kind == "crash" and crash.stage == "worker" and "exit code 7" in crash.error
        compiler.timeout = 3
        hang = compiler.compile("import time\ntime.sleep(30)\n", "f", [f32], get_chip("v5e"))
        assert hang.kind == "timeout" and hang.stage == "worker"
        compiler.timeout = 120
        assert compiler.compile(add_source(8, 128), "add", [f32, f32], get_chip("v5e")).ok


def test_a_slow_worker_start_is_not_part_of_the_compile_time_limit(tmp_path, monkeypatch):
    """A worker whose imports take longer than a compile's limit (two busy cores) still compiles: the limit
    counts from its ready line. The slow start is real: a sitecustomize that sleeps, in the worker only."""
    (tmp_path / "sitecustomize.py").write_text("import time\ntime.sleep(5)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p))
    f32 = S((16, 256), jnp.float32)
    with TpuCompiler(timeout=4) as compiler:
        crash = compiler.compile("import os\nos._exit(7)\n", "f", [f32], get_chip("v5e"))
        assert crash.kind == "crash" and "exit code 7" in crash.error, crash.error
        assert crash.seconds < 4


def test_missing_libtpu_raises_libtpu_unavailable():
    """With libtpu hidden from the import system (as if not installed), compiles raise LibtpuUnavailable."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["libtpu"] = None  # the import system's own "not installed" marker
        import jax
        from compiler.tpu.libtpu_compile import LibtpuUnavailable, libtpu_available, tpu_compile
        from compiler.ir.chips import get_chip
        assert not libtpu_available()
        try:
            tpu_compile("", "f", [jax.ShapeDtypeStruct((8, 128), "float32")], get_chip("v5e"))
        except LibtpuUnavailable as exc:
            print("unavailable:", exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": child_pythonpath()},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "unavailable: libtpu is not installed" in out.stdout
