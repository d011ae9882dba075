"""The VMEM floor (compiler/vmem/floor.py) is a lower bound: for every example and test kernel and configs
spread over its tuning space, it never exceeds the VMEM total the compile reports; and it is not vacuous:
it proves most of attention's never-fitting block sizes out of VMEM without tracing them, and with it the
tuner finds the same best configs and the same pruned counts."""

import itertools
import random

import pytest
from conftest import EXAMPLES, kernel_files

import compiler
from compiler.ir.chips import get_chip
from compiler.support.diagnostics import CompileError

V7X = get_chip("v7x")


def _cases():
    for path in kernel_files():
        for name, kernel in compiler.load(path).kernels.items():
            for i, specs in enumerate(kernel.shape_sets[:2]):
                yield pytest.param(path, name, specs, id=f"{path.parent.name}/{path.stem}-{name}-{i}")


@pytest.mark.parametrize("path,name,specs", list(_cases()))
def test_the_floor_never_exceeds_the_reported_total(path, name, specs):
    kernel = compiler.load(path).kernels[name]
    try:
        floor = kernel.vmem_floor(specs, "v7x")
        space = kernel.config_space(specs, "v7x")
    except CompileError:
        return  # a kernel that does not trace for these shapes has no space to tune
    rng = random.Random(0)
    checked = 0
    for _ in range(6):
        point = {dim: rng.choice(values) for dim, values in space.dimensions}
        config = space.to_config(point)
        try:
            ck = kernel.compile(args=specs, config=config, chip="v7x", emit=False)
        except CompileError:
            continue
        blocks = list(ck.config.get("block_sizes", []))
        assert floor.bytes(blocks) <= ck.vmem.total_bytes, f"{config}: floor above the reported total"
        checked += 1
    assert checked or not space.dimensions


def test_the_floor_proves_most_never_fitting_attention_blocks():
    kernel = compiler.load(EXAMPLES / "attention.py").kernels["attention"]
    specs = kernel.shape_sets[0]
    floor = kernel.vmem_floor(specs, "v7x")
    dims = dict(kernel.config_space(specs, "v7x").dimensions)
    triples = list(itertools.product(*(dims[f"block_sizes[{i}]"] for i in range(3))))
    random.Random(1).shuffle(triples)
    never = proven = 0
    for blocks in triples[:40]:
        totals, widened = [], False
        for loop, buffers in itertools.product(("unroll", "emit_pipeline", "fori_loop"), ([2, 1, 1], [2, 2, 2])):
            config = {"block_sizes": list(blocks), "pallas_loop_type": loop, "pallas_load_buffer_count": buffers}
            plan = kernel.compile(args=specs, config=config, chip="v7x", emit=False)
            totals.append(plan.vmem.total_bytes)
            widened |= any(call.widened_blocks for call in plan.plan.calls)
        assert floor.bytes(list(blocks)) <= min(totals)
        # blocks the TPU cannot tile are read whole: never fitting for a reason the floor, which
        # takes the block sizes as given, does not claim to prove
        if min(totals) > V7X.max_vmem_limit_bytes and not widened:
            never += 1
            proven += floor.bytes(list(blocks)) > V7X.max_vmem_limit_bytes
    assert never >= 10 and proven >= 0.8 * never


def test_a_kernel_that_reads_its_block_size_gets_no_floor():
    source = (EXAMPLES / "attention.py").read_text().replace(
        "        q_blk = q_flat[tile_bh, tile_q, :]\n",
        "        q_blk = q_flat[tile_bh, tile_q, :] * (tile_q.block_size / tile_q.block_size)\n")
    kernel = compiler.load(source).kernels["attention"]
    assert kernel.vmem_floor(kernel.shape_sets[0], "v7x").bytes([256, 8192, 8192]) == 0
