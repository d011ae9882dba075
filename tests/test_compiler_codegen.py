"""Structure of the generated module: standalone imports, explicit pallas_call pieces, loop strategies,
buffering, the source map, and that it runs pasted into a plain JAX program."""

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import pytest
import torch
from conftest import EXAMPLES

import compiler

ATTN = EXAMPLES / "attention.py"
SMALL_ATTN = {"q": "f32[1, 2, 256, 128]", "k": "f32[1, 2, 512, 128]", "v": "f32[1, 2, 512, 128]"}
ALLOWED = {"functools", "jax", "jax.numpy", "jax.experimental.pallas", "jax.experimental.pallas.tpu"}


def attention(config):
    return compiler.load(ATTN).kernels["attention"].compile(args=SMALL_ATTN, config=config)


def test_imports_only_jax_and_pallas():
    tree = ast.parse(attention({"pallas_loop_type": "emit_pipeline"}).source)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported |= {f"{node.module}.{a.name}" for a in node.names}
    assert imported <= ALLOWED, imported - ALLOWED


def test_pallas_call_is_explicit():
    src = attention({"pallas_loop_type": "unroll"}).source
    for piece in ("pl.pallas_call(", "grid=(", "in_specs=[", "out_specs=", "out_shape=", "pl.BlockSpec(",
                  "compiler_params=pltpu.CompilerParams(", "dimension_semantics=", "vmem_limit_bytes="):
        assert piece in src, piece


@pytest.mark.parametrize("loop_type,marker,absent", [
    ("unroll", "in range(", "emit_pipeline("),
    ("fori_loop", "jax.lax.fori_loop(", "emit_pipeline("),
    ("emit_pipeline", "pltpu.emit_pipeline(", "fori_loop("),
])
def test_loop_strategies(loop_type, marker, absent):
    src = attention({"pallas_loop_type": loop_type}).source
    assert marker in src and absent not in src
    if loop_type == "emit_pipeline":
        assert "memory_space=pl.ANY" in src and "scratch_shapes=[" in src and "pltpu.VMEM(" in src
    else:
        assert "whole inner-loop extent resident in VMEM" in src


def test_single_buffered_resident_operands():
    ck = attention({"pallas_loop_type": "unroll", "pallas_load_buffer_count": [2, 1, 1]})
    assert ck.source.count("pipeline_mode=pl.Buffered(1)") == 2
    rows = {r.name: r for r in ck.vmem.rows}
    assert rows["k_flat"].buffer_count == 1 and rows["q_flat"].buffer_count == 2


def test_source_map_points_at_kernel_lines():
    ck = attention({"pallas_loop_type": "unroll"})
    lines = ck.source.splitlines()
    src_lines = ATTN.read_text().splitlines()
    assert ck.source_map
    for gen_line, rng in ck.source_map:
        assert lines[gen_line].rstrip().endswith(f"attention.py:{rng.start.line + 1}")
        assert 0 <= rng.start.line < len(src_lines)
    # the store line of the kernel maps to the generated store
    store_line = next(i for i, t in enumerate(src_lines) if t.strip().startswith("out[") and "=" in t)
    assert any(rng.start.line == store_line and "out_ref[" in lines[g] for g, rng in ck.source_map)


def _jax_only_path() -> str:
    """Where jax and numpy are installed (a TPU VM's jax may sit outside site-packages), nothing of this repo."""
    import numpy

    dirs = {str(Path(m.__file__).resolve().parents[1]) for m in (jax, numpy)}
    assert not any(Path(d, "compiler").is_dir() for d in dirs)
    return os.pathsep.join(sorted(dirs))


def test_module_runs_standalone(tmp_path):
    ck = attention({"pallas_loop_type": "emit_pipeline"})
    (tmp_path / "generated.py").write_text(ck.source)
    script = textwrap.dedent("""
        import sys, jax, jax.numpy as jnp, numpy as np
        from jax.experimental.pallas import tpu as pltpu
        sys.path.insert(0, sys.argv[1])
        import generated
        assert "compiler" not in sys.modules and "helion" not in sys.modules
        rng = np.random.default_rng(0)
        q = jnp.asarray(rng.standard_normal((1, 2, 256, 128)), jnp.float32)
        k = jnp.asarray(rng.standard_normal((1, 2, 512, 128)), jnp.float32)
        v = jnp.asarray(rng.standard_normal((1, 2, 512, 128)), jnp.float32)
        ad = jax.sharding.AbstractDevice(device_kind="TPU7x", num_cores=1, platform="tpu")
        with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((), (), abstract_device=ad)):
            out = generated.attention(q, k, v, interpret=pltpu.InterpretParams())
        ref = jax.nn.dot_product_attention(*(x.transpose(0, 2, 1, 3) for x in (q, k, v))).transpose(0, 2, 1, 3)
        print(float(jnp.max(jnp.abs(out - ref))))
    """)
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300,
                         env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "PYTHONPATH": _jax_only_path()})
    assert res.returncode == 0, res.stderr[-2000:]
    assert float(res.stdout.strip().splitlines()[-1]) < 1e-4


def test_in_place_store_mutates_argument():
    src = textwrap.dedent('''
        import torch, helion
        import helion.language as hl

        @helion.kernel()
        def axpy(x: torch.Tensor, y: torch.Tensor, a: float) -> None:
            for tile in hl.tile(x.size()):
                y[tile] += a * x[tile]
    ''')
    import torch
    ck = compiler.load(src).kernels["axpy"].compile(args="x=f32[16, 256], y=f32[16, 256], a=2.0")
    x, y = torch.randn(16, 256), torch.randn(16, 256)
    expected = y + 2.0 * x
    assert ck(x, y, 2.0) is None
    torch.testing.assert_close(y, expected)
    assert "input_output_aliases" in ck.source and ck.mutated == ["y"]


def test_config_round_trip_and_unknown_keys():
    text = "helion.Config(block_sizes=[1, 256, 256], num_warps=4, pallas_loop_type='unroll')"
    cfg = compiler.Config.parse(text)
    assert repr(cfg) == text and dict(cfg)["num_warps"] == 4
    ck = attention(cfg)
    assert ck.config["num_warps"] == 4 and repr(ck.config).startswith("helion.Config(block_sizes=")
    assert compiler.Config.parse('{"block_sizes": [1, 256, 256], "x": [1]}') == {"block_sizes": [1, 256, 256], "x": [1]}


def test_default_config_and_space():
    k = compiler.load(ATTN).kernels["attention"]
    cfg = k.default_config(SMALL_ATTN, "v7x")
    assert set(cfg) >= {"block_sizes", "pallas_loop_type"} and len(cfg["block_sizes"]) == 3
    space = k.config_space(SMALL_ATTN, "v7x")
    assert space.n_loops == 1 and space.size > 10
    assert all(isinstance(c, compiler.Config) for c in list(space)[:5])


def test_per_block_rows_stay_legal_on_tpu():
    """`buf[tile.id, :]` must not squeeze a tiled dim: the whole buffer stays in VMEM, rows indexed in-kernel."""
    import torch

    from compiler.check import compare
    from compiler.reference import make_inputs, run_reference

    path = EXAMPLES / "rms_norm_bwd.py"
    kernel = compiler.load(path).kernels["rms_norm_bwd"]
    assert kernel.compile(shape_set=0).check_lowering() == []
    ck = kernel.compile(args="grad_out=f32[512, 256], x=f32[512, 256], weight=f32[256], rstd=f32[512, 1]",
                        config={"block_sizes": [128]})
    assert "_ref[tile_m, :] =" in ck.source and ck.plan.calls[0].dimension_semantics == ("arbitrary",)
    inputs = make_inputs(ck.args)
    expected = run_reference(path.read_text(), "rms_norm_bwd", [t.clone() for t in inputs], block_sizes=[128])
    assert compare(ck(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]), expected) is None


def test_loop_orders_permute_the_launch_grid():
    import torch

    from compiler.check import compare
    from compiler.reference import make_inputs, run_reference

    path = EXAMPLES / "bmm.py"
    kernel = compiler.load(path).kernels["bmm"]
    args = "a=f32[2, 256, 512], b=f32[2, 512, 256]"
    assert any(n == "loop_orders[0]" and len(v) == 6 for n, v in kernel.config_space(args).dimensions)
    ck = kernel.compile(args=args, config={"block_sizes": [1, 128, 128, 512], "loop_orders": [[2, 0, 1]]})
    assert ck.plan.calls[0].grid == (2, 2, 2)
    assert "lambda tile_n, tile_b, tile_m:" in ck.source and "tile_n = pl.program_id(0)" in ck.source
    inputs = make_inputs(ck.args)
    expected = run_reference(path.read_text(), "bmm", [t.clone() for t in inputs], block_sizes=[1, 128, 128, 512])
    assert compare(ck(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]), expected) is None
    with pytest.raises(compiler.CompileError, match="permutation"):
        kernel.compile(args=args, config={"loop_orders": [[0, 0, 1]]})


def test_scalar_table_reads_go_to_smem():
    """`biases[g]` with a dynamic g: a vector load from VMEM is unaligned on TPU, so the table lives in SMEM."""
    from conftest import MORE_KERNELS

    kernel = compiler.load(MORE_KERNELS / "scalar_table.py").kernels["scalar_lookup"]
    ck = kernel.compile(config={"pallas_loop_type": "emit_pipeline"})
    assert "pl.BlockSpec(memory_space=pltpu.SMEM)" in ck.source and "biases_smem[g]" in ck.source
    assert all(r.name != "biases" for r in ck.vmem.rows)


def test_host_function_keeps_a_leading_underscore(tmp_path):
    src = """import torch
import helion
import helion.language as hl


@helion.kernel()
def _double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * 2
    return out
"""
    ck = compiler.load(src).kernels["_double"].compile(args="x=f32[16, 128]")
    assert "\ndef _double(x, *, interpret=False):" in ck.source
    x = torch.randn(16, 128)
    torch.testing.assert_close(ck(x), x * 2)

