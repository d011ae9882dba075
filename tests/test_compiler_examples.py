"""Every example and seed kernel, compiled with each applicable loop strategy and two block-size configs,
run in TPU interpret mode, must match the eager reference of the original source."""

import pytest
import torch
from conftest import kernel_files

import compiler
from compiler.check import compare
from compiler.ir.specs import parse_spec
from compiler.reference import load_module, make_inputs, run_reference


def _alternative_blocks(kernel, specs, default):
    """A second legal config next to the default (half the block where legal, else double)."""
    space = kernel.config_space(specs, "v7x")
    alt = []
    for (name, values), d in zip(space.dimensions, default, strict=False):
        assert name.startswith("block_sizes")
        smaller = [v for v in values if v < d]
        larger = [v for v in values if v > d]
        alt.append(smaller[-1] if smaller else (larger[0] if larger else d))
    return alt


def _cases():
    for path in kernel_files():
        module = compiler.load(path)
        ref = load_module(path.read_text(), filename=str(path))
        small = ref.namespace["SMALL"]
        specs = {n: parse_spec(v) for n, v in small.items()}
        for name, k in module.kernels.items():
            default = list(k.default_config(specs)["block_sizes"])
            alt = _alternative_blocks(k, specs, default)
            loops = ["unroll", "emit_pipeline", "fori_loop"] if k.config_space(specs).n_loops else [None]
            for blocks in (default, alt):
                for lt in loops:
                    cid = f"{path.parent.name}/{path.stem}-{lt or 'grid'}-{'x'.join(map(str, blocks))}"
                    yield pytest.param(path, name, specs, blocks, lt, id=cid)


@pytest.mark.parametrize("path,name,specs,blocks,loop_type", list(_cases()))
def test_kernel_matches_reference(path, name, specs, blocks, loop_type):
    source = path.read_text()
    kernel = compiler.load(path).kernels[name]
    config = {"block_sizes": blocks}
    if loop_type:
        config["pallas_loop_type"] = loop_type
    ck = kernel.compile(args=specs, config=config)
    assert ck.plan.calls[0].grid_steps <= 64, "keep interpret-mode grids small"
    inputs = make_inputs(specs)
    out = ck(*[a.clone() if isinstance(a, torch.Tensor) else a for a in inputs])
    expected = run_reference(source, name, [a.clone() if isinstance(a, torch.Tensor) else a for a in inputs],
                             block_sizes=blocks)
    problem = compare(out, expected)
    assert problem is None, problem


def test_two_configs_really_differ():
    path = next(p for p in kernel_files() if p.stem == "attention")
    k = next(iter(compiler.load(path).kernels.values()))
    specs = {n: parse_spec(v) for n, v in load_module(path.read_text()).namespace["SMALL"].items()}
    default = list(k.default_config(specs)["block_sizes"])
    assert _alternative_blocks(k, specs, default) != default
