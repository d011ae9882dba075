"""Position maps between two texts of the same kernel (cached results reused after moves and comment edits)."""

from __future__ import annotations

import ast

from compiler.support.diagnostics import Position, Range
from helion_ls.session.positions import KernelSource, PositionMap

KERNEL = """\
@helion.kernel(static_shapes=True)
def add(x, y):
    out = torch.empty_like(x)
    for tile in hl.tile(out.size()):
        out[tile] = x[tile] + y[tile]
    return out
"""


def source(text: str) -> KernelSource:
    tree = ast.parse(text)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    return KernelSource.of(fn, text.splitlines(keepends=True))


def pos_of(text: str, needle: str, nth: int = 0) -> Position:
    """Position (zero-based line, byte column) of the nth occurrence of needle."""
    idx = -1
    for _ in range(nth + 1):
        idx = text.index(needle, idx + 1)
    line = text.count("\n", 0, idx)
    col = len(text[text.rfind("\n", 0, idx) + 1 : idx].encode())
    return Position(line, col)


def test_same_text_is_identity():
    m = PositionMap.between(source(KERNEL), source(KERNEL))
    assert m is not None and m.is_identity
    assert m.forward(Position(4, 8)) == Position(4, 8)


def test_moved_kernel_shifts_lines():
    moved = "import helion\n\n\n" + KERNEL
    m = PositionMap.between(source(KERNEL), source(moved))
    p = pos_of(KERNEL, "y[tile]")
    assert m.forward(p) == pos_of(moved, "y[tile]")
    assert m.backward(pos_of(moved, "y[tile]")) == p


def test_comment_and_spacing_edits_inside_the_body():
    edited = KERNEL.replace("    for tile", "    # walk the tiles\n    for tile").replace(
        "x[tile] + y[tile]", "x[tile]  +  y[tile]  # sum"
    )
    m = PositionMap.between(source(KERNEL), source(edited))
    assert m is not None and not m.is_identity
    old = Range(
        pos_of(KERNEL, "y[tile]"),
        Position(pos_of(KERNEL, "y[tile]").line, pos_of(KERNEL, "y[tile]").character + 7),
    )
    new = m.forward_range(old)
    assert new.start == pos_of(edited, "y[tile]")
    assert new.end.character == new.start.character + 7
    # a line before the edit does not move, a line after moves by one
    assert m.forward(pos_of(KERNEL, "out = torch")) == pos_of(edited, "out = torch")
    assert m.forward(pos_of(KERNEL, "return out")) == pos_of(edited, "return out")
    # backward is the inverse on node positions
    assert m.backward(pos_of(edited, "out.size()")) == pos_of(KERNEL, "out.size()")
    # a position inside a line but not at a node start keeps its column on the mapped line
    assert m.forward(Position(4, 2)) == Position(5, 2)


def test_decorator_edit_keeps_body_mapping():
    edited = KERNEL.replace(
        "@helion.kernel(static_shapes=True)",
        "@helion.kernel(\n    static_shapes=True,\n    config=helion.Config(block_sizes=[64, 128]),\n)",
    )
    m = PositionMap.between(source(KERNEL), source(edited))
    assert m.forward(pos_of(KERNEL, "x[tile] +")) == pos_of(edited, "x[tile] +")
    assert m.forward(pos_of(KERNEL, "def add")) == pos_of(edited, "def add")


def test_structural_change_gives_no_map():
    assert PositionMap.between(source(KERNEL), source(KERNEL.replace("x[tile] + y", "x[tile] * y"))) is None
