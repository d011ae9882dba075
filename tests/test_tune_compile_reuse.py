"""Compiles the tuner reuses: a kernel's trace is shared by configs that differ only in strategy, buffering
or loop order, and what they generate must be exactly what a fresh compile generates."""

from __future__ import annotations

import itertools

import pytest
from conftest import EXAMPLES

import compiler

VARIANTS = [
    ("attention", 0, [[2, 512, 2048], [1, 256, 1024]],
     [{"pallas_loop_type": t} for t in ("unroll", "emit_pipeline", "fori_loop")]
     + [{"pallas_loop_type": "unroll", "pallas_load_buffer_count": [2, 1, 1]},
        {"pallas_loop_type": "fori_loop", "loop_orders": [[1, 0]]}]),
    ("bmm", 0, [[1, 256, 256, 512]], [{"pallas_loop_type": t} for t in ("unroll", "emit_pipeline", "fori_loop")]),
    ("softmax", 0, [[64], [256]], [{}]),
]


@pytest.mark.parametrize(("name", "shape_set", "blocks", "variants"), VARIANTS, ids=[v[0] for v in VARIANTS])
def test_shared_traces_generate_what_fresh_compiles_generate(name, shape_set, blocks, variants) -> None:
    source = (EXAMPLES / f"{name}.py").read_text()
    shared = compiler.load(source).kernels[name]
    for b, extra in itertools.product(blocks, variants):
        config = {"block_sizes": b, **extra}
        reused = shared.compile(shape_set=shape_set, config=config)
        fresh = compiler.load(source).kernels[name].compile(shape_set=shape_set, config=config)
        assert reused.source == fresh.source, config
        assert reused.plan == fresh.plan, config
        assert reused.vmem.total_bytes == fresh.vmem.total_bytes
    assert len(shared._traces) == len(blocks)  # one trace per block-size choice
