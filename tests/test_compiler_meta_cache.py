"""Memoised meta typing (compiler/frontend/meta_cache.py): a kernel traced with results reused from other
configs' traces must compile to exactly what a fresh trace gives — the same module text, the same VMEM
report and plan — for every example and test kernel, on several configs each."""

import pytest
import torch
from conftest import kernel_files

import compiler
from compiler.frontend import meta_cache
from compiler.support.diagnostics import CompileError


def _configs(kernel, specs):
    """The default config and up to four others spread over the space (smallest/largest blocks, other
    loop strategies and buffer counts), in a fixed order."""
    space = kernel.config_space(specs, "v7x")
    picks = [kernel.default_config(specs, "v7x")]
    dims = space.dimensions
    for k in range(4):
        point = {name: values[(k * (len(values) - 1) + k // 2) % len(values)] for name, values in dims}
        picks.append(space.to_config(point))
    return list(dict.fromkeys(picks))


def _compile_all(path, name, specs, configs):
    """Module text + VMEM table + modelled figures per config, from a fresh load of the file."""
    kernel = compiler.load(path).kernels[name]
    out = []
    for cfg in configs:
        try:
            ck = kernel.compile(args=specs, config=cfg, chip="v7x")
        except CompileError as exc:
            out.append(("error", [d.message for d in exc.diagnostics]))
            continue
        out.append((ck.source, ck.vmem.table(), ck.plan.flops, ck.plan.hbm_bytes, repr(ck.config)))
    return out


def _cases():
    for path in kernel_files():
        module = compiler.load(path)
        for name, kernel in module.kernels.items():
            for i, specs in enumerate(kernel.shape_sets[:2]):
                yield pytest.param(path, name, specs, id=f"{path.parent.name}/{path.stem}-{name}-{i}")


@pytest.mark.parametrize("path,name,specs", list(_cases()))
def test_reused_meta_results_give_the_fresh_trace(path, name, specs):
    configs = _configs(compiler.load(path).kernels[name], specs)
    with meta_cache.bypassed():
        fresh = _compile_all(path, name, specs, configs)
    meta_cache.clear()
    _compile_all(path, name, specs, list(reversed(configs)))  # fills the cache from the other configs first
    hits = meta_cache.stats["hits"]
    reused = _compile_all(path, name, specs, configs)
    assert meta_cache.stats["hits"] > hits, "the second compile reused nothing"
    for cfg, a, b in zip(configs, fresh, reused, strict=True):
        assert a == b, f"{cfg}: a trace with reused meta results differs from a fresh one"


def test_results_are_keyed_by_input_types_and_captured_values():
    meta_cache.clear()

    def cast_to(dtype):
        return lambda t: t.to(dtype)

    x = torch.empty((8, 128), dtype=torch.float32, device="meta")
    y = torch.empty((16, 128), dtype=torch.float32, device="meta")
    assert meta_cache.typed(cast_to(torch.bfloat16), [x], {}).dtype == torch.bfloat16
    assert meta_cache.typed(cast_to(torch.int32), [x], {}).dtype == torch.int32  # same code, other capture
    assert meta_cache.typed(torch.add, [x, 1], {}).dtype == torch.float32
    assert tuple(meta_cache.typed(torch.add, [y, 1], {}).shape) == (16, 128)
    i = torch.empty((8,), dtype=torch.int32, device="meta")
    assert meta_cache.typed(torch.add, [i, 1], {}).dtype == torch.int32
    assert meta_cache.typed(torch.add, [i, 1.0], {}).dtype == torch.float32  # 1 and 1.0 are different keys
    assert meta_cache.typed(torch.add, [i, True], {}).dtype == torch.int32
    assert meta_cache.typed(lambda t, s: t[s], [x, slice(0, 4)], {}).shape == (4, 128)
    assert meta_cache.typed(lambda t, s: t[s], [x, slice(0, 2)], {}).shape == (2, 128)
    hits = meta_cache.stats["hits"]
    again = meta_cache.typed(torch.add, [y, 1], {})
    assert meta_cache.stats["hits"] == hits + 1 and tuple(again.shape) == (16, 128)
    assert again is not meta_cache.typed(torch.add, [y, 1], {})  # a fresh tensor per hit, never shared


def test_failures_are_raised_every_time():
    a = torch.empty((8, 128), device="meta")
    b = torch.empty((7, 128), device="meta")
    for _ in range(2):
        with pytest.raises(RuntimeError):
            meta_cache.typed(torch.add, [a, b], {})
