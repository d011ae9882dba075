"""The decorator line a tuned config is pasted as: the kernel's own decorator, its other arguments kept."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from ..api import Kernel
from ..ir.config import Config
from ..support.syntax import parse


def decorator_line(kernel: Kernel, config: Mapping[str, Any]) -> str:
    """`@helion.kernel(<the decorator's other arguments>, config=helion.Config(...))` to paste."""
    cfg = repr(Config(dict(config)))
    text = _range_text(kernel.source, kernel.decorator_range)
    try:
        node = parse(text.strip(), mode="eval").body
    except SyntaxError:
        node = None
    if isinstance(node, ast.Call):
        kept = [ast.unparse(a) for a in node.args]
        kept += [ast.unparse(kw) for kw in node.keywords if kw.arg not in ("config", "configs")]
        return f"@{ast.unparse(node.func)}({', '.join([*kept, f'config={cfg}'])})"
    func = ast.unparse(node) if node is not None else "helion.kernel"
    return f"@{func}(config={cfg})"


def _range_text(source: str, rng: Any) -> str:
    lines = source.splitlines()
    start, end = rng.start, rng.end
    if start.line == end.line:
        return lines[start.line][start.character : end.character]
    parts = [
        lines[start.line][start.character :],
        *lines[start.line + 1 : end.line],
        lines[end.line][: end.character],
    ]
    return "\n".join(parts)
