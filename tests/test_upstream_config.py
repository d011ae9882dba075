"""Every config this project writes must be one upstream Helion's `Config` accepts (tests/upstream_config.py
holds the table of its keys and value types): what tuning can pick, the VMEM quick fixes, and what the CLI
prints. (Apply's edits are checked in test_ls_apply.py and the editor run in vscode-client/e2e/run.mjs.)"""

from __future__ import annotations

import ast
import json

import pytest
from conftest import EXAMPLES, MORE_KERNELS, kernel_files
from upstream_config import problems

import compiler
from compiler.cli import main
from compiler.ir.config import config_from_call
from compiler.ir.specs import TensorSpec, parse_spec
from compiler.reference import load_module
from compiler.vmem.fixes import vmem_fixes

WELFORD = MORE_KERNELS / "welford_layer_norm.py"


def tensor_args(specs: dict) -> int:
    return sum(isinstance(s, TensorSpec) for s in specs.values())


def test_the_table_refuses_what_upstream_refuses():
    assert problems({"block_sizes": [256, 1024], "pallas_loop_type": "unroll"}) == []
    assert problems({"pallas_loop_type": ["unroll", "emit_pipeline"]})  # one string for every loop
    assert problems({"pallas_load_buffer_count": 1})  # a list
    assert problems({"pallas_load_buffer_count": [2, 3]})  # of 1s and 2s
    assert problems({"pallas_loop_type": "fori_loop", "pallas_load_buffer_count": [2, 1]}, tensor_args=3)
    assert not problems({"pallas_loop_type": "fori_loop", "pallas_load_buffer_count": [2, 1, 2]}, tensor_args=3)
    assert problems({"block_size": 16})  # not a key


def _spec_sets(path, kernel):
    sets = list(kernel.shape_sets)
    if not sets:
        small = load_module(path.read_text(), filename=str(path)).namespace.get("SMALL")
        sets = [{n: parse_spec(v) for n, v in small.items()}] if small else []
    return sets


def _variations(space):
    """The default point and every one-dimension change of it, with every loop type (the buffer counts'
    length matters under fori_loop)."""
    names = [n for n, _ in space.dimensions]
    base = {n: v[0] for n, v in space.dimensions}
    loops = dict(space.dimensions).get("pallas_loop_type", [None])
    for loop in loops:
        start = {**base, "pallas_loop_type": loop} if loop is not None else base
        yield space.to_config(start)
        for name, values in space.dimensions:
            for value in values[1:]:
                yield space.to_config({**start, name: value})
    assert names


@pytest.mark.parametrize("path", [p for p in kernel_files() if p.parent in (EXAMPLES, MORE_KERNELS)], ids=lambda p: p.stem)
def test_every_config_tuning_can_pick_is_one_upstream_accepts(path):
    for kernel in compiler.load(path).kernels.values():
        for specs in _spec_sets(path, kernel):
            space = kernel.config_space(specs, "v7x")
            if not space.dimensions:
                continue
            for config in _variations(space):
                assert not problems(config, tensor_args(specs)), (kernel.name, dict(config), problems(config))


def test_vmem_quick_fixes_are_configs_upstream_accepts():
    kernel = compiler.load(EXAMPLES / "attention.py").kernels["attention"]
    given = {"block_sizes": [1, 256, 512], "pallas_loop_type": "unroll"}  # out of VMEM at 32k
    fixes = vmem_fixes(kernel, kernel.shape_sets[1], given, "v7x", deadline=None)
    assert {f.kind for f in fixes} >= {"buffering"}, fixes
    for fix in fixes:
        assert not problems(fix.config, tensor_args(kernel.shape_sets[1])), fix


def test_what_the_tune_command_prints_is_upstream_config(tmp_path, capsys):
    code = main(["tune", str(WELFORD), "--args", "weight=f32[1024], bias=f32[1024], x=f32[256, 1024], eps=1e-5",
                 "--max-evals", "16", "--top", "16", "--executor", "inline", "--json",
                 "--store", str(tmp_path / "s.sqlite")])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    configs = [result["best"]["config"], *[t["config"] for t in result["top"]]]
    decorator = ast.parse(result["best"]["decorator"].lstrip("@"), mode="eval").body
    configs += [config_from_call(kw.value) for kw in decorator.keywords if kw.arg == "config"]
    assert len(configs) > 3
    for config in configs:
        assert not problems(config, tensor_args=3), config
