"""Integer tables drawn as what the kernel reads them as (compiler/frontend/table_roles.py, compiler/ir/tables.py): jagged
offsets, positions into another tensor, loop counts — for `check` and the tuner's gate alike."""

from __future__ import annotations

import torch

import compiler
from compiler.ir.tables import IndexTable
from compiler.reference import make_inputs

KERNELS = """
import helion
import helion.language as hl
import torch


# helion: args(values=f32[64, 128], bounds=i32[5])
@helion.kernel(static_shapes=True)
def segment_sums(values: torch.Tensor, bounds: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([bounds.size(0) - 1, values.size(1)], dtype=torch.float32, device=values.device)
    for seg in hl.grid(bounds.size(0) - 1):
        first = bounds[seg]
        last = bounds[seg + 1]
        acc = hl.zeros([values.size(1)], dtype=torch.float32)
        for rows in hl.tile(first, last):
            acc = acc + values[rows, :].sum(0)
        out[seg, :] = acc
    return out


# helion: args(data=f32[200], offs=i64[17], dense=f32[16, 24])
@helion.kernel(static_shapes=True)
def pad_rows(data: torch.Tensor, offs: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(dense)
    for tr in hl.tile(dense.size(0)):
        lo = offs[tr]
        hi = offs[tr.index + 1]
        n = hi - lo
        for tc in hl.tile(0, n.amax()):
            vals = hl.load(data, [lo[:, None] + tc.index[None, :]], extra_mask=tc.index[None, :] < n[:, None])
            out[tr, tc] = dense[tr, tc] + vals
    return out


# helion: args(blocks=f32[6, 16, 128], picks=i32[4])
@helion.kernel(static_shapes=True)
def pick_blocks(blocks: torch.Tensor, picks: torch.Tensor) -> torch.Tensor:
    b, s, d = blocks.size()
    flat = blocks.view(b * s, d)
    out = torch.empty([picks.size(0) * s, d], dtype=blocks.dtype, device=blocks.device)
    for t in hl.tile(picks.size(0) * s):
        which = picks[t.index // s]
        out[t, :] = flat[which * s + t.index % s, :] * 2
    return out


# helion: args(scores=f32[32, 96], labels=i64[32])
@helion.kernel(static_shapes=True)
def picked(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    v = scores.size(1)
    flat = scores.view(-1)
    out = torch.empty([scores.size(0)], dtype=scores.dtype, device=scores.device)
    for t in hl.tile(scores.size(0)):
        out[t] = hl.load(flat, [t.index * v + labels[t]])
    return out
"""


def _compiled(name: str):
    return compiler.load(KERNELS, "tables.py").kernels[name].compile(shape_set=0)


def test_the_kernels_use_decides_each_tables_kind_and_extent():
    """Offsets: read at p and p + 1 (an hl.grid position and a tile's positions alike); their extent is the
    dim their values index (rows of `values`; elements of the 1-D `data`), and a loop over a row's length
    that indexes `dense` bounds every row by its width. Positions: scaled by s into a [b * s, d] view: [0, b);
    added to a row's start in a flat view (`t.index * v + labels[t]`, upstream cross_entropy): inside the row."""
    assert _compiled("segment_sums").tables == (IndexTable("bounds", "offsets", 64),)
    assert _compiled("pad_rows").tables == (IndexTable("offs", "offsets", 200, longest=24),)
    assert _compiled("pick_blocks").tables == (IndexTable("picks", "positions", 6),)
    assert _compiled("picked").tables == (IndexTable("labels", "positions", 96),)


def test_tables_are_drawn_as_their_kind():
    ck = _compiled("segment_sums")
    _, bounds = make_inputs(dict(ck.args), tables=ck.tables)
    lengths = bounds.diff()
    assert bounds[0] == 0 and bounds[-1] == 64 and (lengths >= 0).all() and lengths.unique().numel() > 1
    ck = _compiled("pad_rows")
    _, offs, _ = make_inputs(dict(ck.args), seed=3, tables=ck.tables)
    assert offs.dtype == torch.int64 and offs[0] == 0 and offs[-1] <= 200
    assert (offs.diff() >= 0).all() and offs.diff().max() <= 200 // 16
    ck = _compiled("pick_blocks")
    _, picks = make_inputs(dict(ck.args), tables=ck.tables)
    assert picks.min() >= 0 and picks.max() < 6


def test_check_and_the_gate_run_jagged_and_gathering_kernels_on_tables_they_can_use(tmp_path, capsys, without_libtpu):
    """Drawn in [-8, 8] these were negative lengths and positions outside the gathered dim: the eager
    reference raised (NOT CHECKED) or both sides read garbage. Drawn as what they are, every kernel is
    compared, with no NaN, in check and in the tuner's gate (the reference process draws the same tables)."""
    from compiler.check import check_file
    from compiler.tune.correctness import check_compiled

    path = tmp_path / "tables.py"
    path.write_text(KERNELS)
    code = check_file(str(path), None, "v7x", ["fori_loop"])
    rows = capsys.readouterr().out.splitlines()[1:5]
    assert code == 0 and [r.split()[-3] for r in rows] == ["ok", "ok", "ok", "ok"], rows
    for name in ("segment_sums", "pad_rows", "pick_blocks", "picked"):
        gate = check_compiled(_compiled(name))
        assert gate.verdict == "ok" and gate.max_error is not None, (name, gate.message)
