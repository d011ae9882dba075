"""Python functions as kernel arguments (flex attention's `score_mod` / `mask_mod`): compiled in per function,
from the function object when the kernel is called from Python and from the file's own calls in the editor
(tests/upstream_style/flex.py, written like upstream's flex-attention example, has no shape line)."""

from __future__ import annotations

import math
import pickle
import textwrap
from pathlib import Path

import pytest
import torch
from torch.nn.attention.flex_attention import _create_empty_block_mask, _identity, noop_mask

import compiler
from compiler.ir.callables import CallableError, SpecFunction, callable_spec
from compiler.ir.specs import CallableSpec, format_args
from compiler.ir.tables import IndexTable
from compiler.support.diagnostics import CompileError

FLEX = (Path(__file__).parent / "upstream_style" / "flex.py").read_text()


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n")


@pytest.fixture(scope="module")
def flex() -> compiler.Module:
    return compiler.load(FLEX, "flex.py")


def flex_args(score_mod, heads=2, n=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, heads, n, 64, generator=g) for _ in range(3))
    bm = _create_empty_block_mask(q, k)
    return [q, k, v, score_mod, bm.kv_num_blocks, bm.kv_indices, bm.mask_mod, *bm.BLOCK_SIZE, 1 / math.sqrt(64)]


def compiled_for(kernel, args):
    return kernel.compile(args=dict(zip(kernel.params, args, strict=True)))


def test_the_call_search_supplies_torchs_default_and_mains_lambda(flex):
    kernel = flex.kernels["flex_kernel"]
    first, second = kernel.shape_sets
    # flex() picks torch's `_identity` when main() passes none: read from the installed torch, traced at its call
    assert first["score_mod"] == callable_spec(_identity) and first["score_mod"].origin is None
    assert first["mask_mod"] == callable_spec(noop_mask)  # from the modelled _create_empty_block_mask
    # main()'s lambda, at its place in the file
    lam = second["score_mod"]
    call = line_of(FLEX, "    test(2, 256, lambda")
    assert lam.source == "lambda score, *_: torch.tanh(score)"
    assert lam.origin == (call, FLEX.splitlines()[call].index("lambda"))
    assert kernel.shape_set_origins[1].label.startswith("from `test(2, 256, lambda score, *_:")
    assert not kernel.shape_hint and not [d for d in flex.diagnostics if d.is_error]
    plain, capped = kernel.compile(shape_set=0), kernel.compile(shape_set=1)
    assert not [d for d in plain.diagnostics + capped.diagnostics if d.is_error]
    assert "jnp.tanh(" in capped.source and "jnp.tanh(" not in plain.source


def test_shape_sets_found_elsewhere_reach_a_process_without_torch(flex, tmp_path):
    import subprocess
    import sys

    path = tmp_path / "flex.py"
    path.write_text(FLEX)
    script = textwrap.dedent("""
        import pickle, sys
        import compiler
        shapes = pickle.loads(sys.stdin.buffer.read())
        m = compiler.load(open(sys.argv[1]).read(), sys.argv[1], call_shapes=shapes)
        from compiler.ir.specs import format_args
        print([format_args(s) for s in m.kernels["flex_kernel"].shape_sets])
        print("torch" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script, str(path)], input=pickle.dumps(flex.call_shapes),
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    sets, torch_loaded = done.stdout.decode().splitlines()[-2:]
    assert "score_mod=lambda score, *_: torch.tanh(score)@" in sets and torch_loaded == "False"


def test_each_function_is_its_own_kernel_and_the_call_must_pass_it(flex):
    kernel = flex.kernels["flex_kernel"]
    cap = 1.5
    a, b = (lambda s, *_: s * 0.5), (lambda s, *_: cap * torch.tanh(s / cap))  # two lambdas on one line
    compiled = {name: compiled_for(kernel, flex_args(fn)) for name, fn in (("identity", _identity), ("half", a),
                                                                          ("capped", b))}
    # three functions, three kernels: the spec (source + the constants it reads) is part of every key
    assert len({format_args(ck.args) for ck in compiled.values()}) == 3
    assert len({ck.source for ck in compiled.values()}) == 3
    assert callable_spec(b).names == (("cap", "value", 1.5), ("torch", "module", "torch"))
    assert compiled_for(kernel, flex_args(a)).source == compiled["half"].source  # the same function: the same
    args = flex_args(a)
    q, k, v = args[:3]
    torch.testing.assert_close(compiled["half"](*args), torch.softmax(q @ k.transpose(-1, -2) / 16, -1) @ v,
                               atol=2e-3, rtol=2e-3)
    # a compiled kernel refuses another function than the one it was compiled for
    with pytest.raises(ValueError, match="score_mod: compiled for the function"):
        compiled["half"](*flex_args(b))


def test_spec_functions_run_where_the_shape_sets_are_run(flex):
    """The check and the tuner call kernels with inputs made from specs: a function spec becomes a function
    that pickles as its spec (the eager reference runs in another process)."""
    spec = flex.kernels["flex_kernel"].shape_sets[1]["score_mod"]
    fn = pickle.loads(pickle.dumps(SpecFunction(spec)))
    x = torch.randn(4)
    torch.testing.assert_close(fn(x, 0, 0, 0, 0), torch.tanh(x))
    assert callable_spec(fn) == spec
    args = flex_args(fn, n=256)
    got = flex.kernels["flex_kernel"].compile(shape_set=1)(*args)
    q, k, v = args[:3]
    torch.testing.assert_close(got, torch.softmax(torch.tanh(q @ k.transpose(-1, -2) / 8), -1) @ v,
                               atol=2e-3, rtol=2e-3)


def test_a_function_reading_a_tensor_is_refused_on_its_parameter(flex):
    kernel = flex.kernels["flex_kernel"]
    bias = torch.ones(3)
    with pytest.raises(CompileError) as info:
        compiled_for(kernel, flex_args(lambda s, *_: s + bias))
    (diag,) = info.value.diagnostics
    assert diag.code == "HPL104" and "`score_mod` reads `bias`, a Tensor" in diag.message
    assert diag.range.start.line == line_of(FLEX, "score_mod: Callable")
    with pytest.raises(CallableError, match="plain function or lambda"):
        callable_spec(torch.tanh)


HOSTILE = FLEX.replace("def main() -> None:", "SCALE = float(open('scale.txt').read())\n\n\ndef main() -> None:") \
    .replace("lambda score, *_: torch.tanh(score)", "lambda score, *_: score * SCALE")


def test_a_lambda_reading_what_the_tool_cannot_know_is_an_error_on_that_name():
    module = compiler.load(HOSTILE, "flex.py")
    kernel = module.kernels["flex_kernel"]
    assert len(kernel.shape_sets) == 2
    with pytest.raises(CompileError) as info:
        kernel.compile(shape_set=1)
    (diag,) = info.value.diagnostics
    line = line_of(HOSTILE, "    test(2, 256, lambda")
    col = HOSTILE.splitlines()[line].index("SCALE")
    assert diag.code == "HPL102" and "SCALE" in diag.message
    assert (diag.range.start.line, diag.range.start.character) == (line, col)
    assert kernel.compile(shape_set=0).source  # the other shape set is unaffected


def test_a_function_with_no_source_is_said_plainly():
    ns: dict = {}
    exec("f = lambda s, *_: s", ns)  # noqa: S102 - a function whose file does not exist
    with pytest.raises(CallableError, match="cannot read the source of a lambda"):
        callable_spec(ns["f"], "score_mod")
    assert isinstance(callable_spec(_identity), CallableSpec)


def test_a_function_the_tool_cannot_see_is_named_on_its_parameter():
    text = FLEX.replace("score_mod = _identity", "score_mod = load_score_mod()") \
        .replace("    test(2, 256, lambda score, *_: torch.tanh(score))\n", "")
    kernel = compiler.load(text, "flex.py").kernels["flex_kernel"]
    assert not kernel.shape_sets
    hint = kernel.shape_hint
    assert hint.code == "HPL107" and hint.fix is None  # no placeholder lambda fits every function parameter
    assert hint.range.start.line == line_of(text, "score_mod: Callable")
    assert hint.range.start.character == text.splitlines()[hint.range.start.line].index("score_mod")
    assert "parameter `score_mod` takes a function this tool could not see" in hint.message
    assert f"the call at line {line_of(text, 'return flex_kernel(') + 1}: argument `score_mod` is not known" \
        in hint.message


def test_a_shape_line_gives_functions_as_lambdas():
    line = ("# helion: args(q=f32[1, 2, 128, 64], k=f32[1, 2, 128, 64], v=f32[1, 2, 128, 64], "
            "score_mod=lambda s, *_: s * HALF, num_blocks=i32[1, 1, 1], indices=i32[1, 1, 1, 1], "
            "mask_mod=lambda b, h, m, n: m >= n, sparse_m=1073741824, sparse_n=1073741824, scale=0.125)\n")
    text = FLEX.replace("@helion.kernel(static_shapes=True)", line + "@helion.kernel(static_shapes=True)") \
        .replace("def flex(", "HALF = 0.5\n\n\ndef flex(")
    kernel = compiler.load(text, "flex.py").kernels["flex_kernel"]
    (specs,) = kernel.shape_sets
    assert specs["score_mod"] == CallableSpec("lambda s, *_: s * HALF", names=(("HALF", "value", 0.5),))
    args = flex_args(None)
    args[3], args[6] = SpecFunction(specs["score_mod"]), SpecFunction(specs["mask_mod"])  # as the check runs it
    q, k, v = args[:3]
    pos = torch.arange(128)
    s = (q @ k.transpose(-1, -2) / 16).masked_fill(pos[:, None] < pos[None, :], float("-inf"))
    torch.testing.assert_close(kernel.compile()(*args), torch.softmax(s, -1) @ v, atol=2e-3, rtol=2e-3)


def test_check_and_the_tuners_gate_run_flex_on_block_tables_it_can_use(flex, tmp_path, capsys):
    """The block-mask tables are read as a loop count and as the start of the keys' loop: the check draws the
    count in [1, entries of the block table] and the starts inside the keys, not in [-8, 8] (a zero count gave a
    softmax over no keys, 0/0 everywhere, which the check called a MISMATCH). The tuner's gate calls the eager
    reference with the function arguments the compiled module leaves out."""
    from compiler.check import check_file
    from compiler.tune.correctness import check_compiled

    ck = flex.kernels["flex_kernel"].compile(shape_set=0, config={"pallas_loop_type": "fori_loop"})
    assert ck.tables == (IndexTable("num_blocks", "counts", 1), IndexTable("indices", "positions", 128))
    gate = check_compiled(ck)
    assert gate.verdict == "ok" and gate.max_error, gate.message  # real numbers compared (all NaN gives 0)
    path = tmp_path / "flex.py"
    path.write_text(FLEX)
    code = check_file(str(path), None, "v7x", ["fori_loop"])
    out = capsys.readouterr().out
    assert code == 0 and out.splitlines()[1].split()[-3:-1] == ["ok", "-"], out


def test_check_shrinks_a_kernel_whose_tables_follow_its_shapes(flex):
    """The tables are drawn from the shapes they index (starts inside the keys, a count within the block
    table): `check` shrinks such a kernel like any other, and the tables of the shrunk compile follow the
    shrunk keys. A count whose loop indexes nothing (drawn in [1, 8]: block numbers only these sizes may
    have) keeps the kernel's shapes."""
    from compiler.check import _reduced

    kernel = flex.kernels["flex_kernel"]
    ck = kernel.compile(args={**kernel.shape_sets[0], "q": "f32[4, 2, 4096, 64]", "k": "f32[4, 2, 4096, 64]",
                              "v": "f32[4, 2, 4096, 64]"}, config={"pallas_loop_type": "fori_loop"})
    small = _reduced(kernel, ck, "v7x")
    assert small.args["k"].shape[2] < 4096
    assert small.tables[1] == IndexTable("indices", "positions", small.args["k"].shape[2])
    repeat = compiler.load(REPEAT, "repeat.py").kernels["repeat_rows"]
    big = repeat.compile(args={"x": "f32[2048, 4096]", "reps": "i32[2048]"})
    assert big.tables == (IndexTable("reps", "counts"),) and _reduced(repeat, big, "v7x") is big


REPEAT = """
import helion
import helion.language as hl
import torch


@helion.kernel(static_shapes=True)
def repeat_rows(x: torch.Tensor, reps: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    for g in hl.grid(x.size(0)):
        acc = hl.zeros([x.size(1)], dtype=torch.float32)
        for _ in hl.tile(reps[g], block_size=1):
            acc = acc + x[g, :]
        out[g, :] = acc
    return out
"""
