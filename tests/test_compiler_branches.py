"""`if` on a value computed on the device: both branches run, stores under a branch keep the old values where
its condition is false, names either branch assigns are selected after it; results match plain torch, and
what cannot be selected between is refused on its line."""

import textwrap

import pytest
import torch

import compiler
from compiler import CompileError

HEADER = "import torch\nimport helion\nimport helion.language as hl\n\n"


def kernel(source: str):
    return next(iter(compiler.load(HEADER + textwrap.dedent(source)).kernels.values()))


CLIP_ROWS = """
    @helion.kernel()
    def clip_rows(x: torch.Tensor, limits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = torch.zeros_like(x)
        negative = torch.zeros([x.size(0)], dtype=torch.float32, device=x.device)
        for r in hl.grid(x.size(0)):
            top = limits[r]
            total = hl.zeros([1], dtype=torch.float32)
            for t in hl.tile(x.size(1)):
                part = x[r, t].sum().reshape([1])
                if top > 0:
                    total = total + part
                    if part[0] > top:
                        out[r, t] = torch.clamp(x[r, t], max=top)
                else:
                    total = total - part
            if total[0] < 0:
                negative[r] = total[0]
        return out, negative
"""


@pytest.mark.parametrize("strategy", ["unroll", "fori_loop", "emit_pipeline"])
def test_predicated_stores_and_selected_carries_match_torch(strategy):
    x = torch.randn(8, 512)
    limits = torch.tensor([0.5, -1.0, 3.0, 0.0, 0.1, 10.0, -0.2, 1.0])
    ck = kernel(CLIP_ROWS).compile(args="x=f32[8, 512], limits=f32[8]",
                                   config={"block_sizes": [128], "pallas_loop_type": strategy})
    out, negative = ck(x.clone(), limits.clone())
    want, want_negative = torch.zeros_like(x), torch.zeros(8)
    for r in range(8):
        top, total = float(limits[r]), 0.0
        for c in range(0, 512, 128):
            part = float(x[r, c:c + 128].sum())
            if top > 0:
                total += part
                if part > top:
                    want[r, c:c + 128] = x[r, c:c + 128].clamp(max=top)
            else:
                total -= part
        if total < 0:
            want_negative[r] = total
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(negative, want_negative, rtol=1e-4, atol=1e-4)
    assert (want_negative < 0).any() and (want_negative == 0).any()
    assert "jnp.where(jnp.logical_and(" in ck.source  # the nested store's predicate


@pytest.mark.parametrize("body, code, message, line", [
    ("if x[r, 0] > 0:\n            return out", "HPL101", "`return` under an `if` on a device value", 10),
    ("v = x[r, :]\n        if x[r, 0] > 0:\n            v = v.sum()\n        out[r, :] = v", "HPL105",
     "`v` is float32[] after one branch", 10),
    ("if x[r, :] > 0:\n            out[r, :] = x[r, :]", "HPL101", "`if` on a tensor of shape [128]", 9),
    ("n = 1\n        if x[r, 0] > 0:\n            n = 2\n        out[r, :] = x[r, :] * n", "HPL101",
     "`n` gets a different compile-time value", 10),
])
def test_what_both_branches_cannot_agree_on_is_refused(body, code, message, line):
    source = f"""
    @helion.kernel()
    def k(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for r in hl.grid(x.size(0)):
            {textwrap.indent(body, '    ').strip()}
        return out
    """
    with pytest.raises(CompileError) as info:
        kernel(source).compile(args="x=f32[8, 128]")
    d = info.value.diagnostics[0]
    assert d.code == code and message in d.message and d.range.start.line == line, d
