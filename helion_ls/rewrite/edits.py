"""Rewrite a kernel's decorator to carry a config, touching nothing else.

Applying a tuned config must keep the user's other decorator arguments, comments and layout, so the
edit is the smallest text change that does the job: replace the value of an existing `config=`, replace
one element of an existing `configs=[...]`, swap one keyword for the other, or insert a keyword. The
result is a single `TextEdit` on code-point offsets of the source (the LSP layer converts offsets to
positions in the negotiated encoding). Pure: only `ast`, `tokenize` and `compiler.ir.config`.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compiler import parse_python
from compiler.ir.config import Config

INDENT_STEP = 4
INLINE_LIMIT = 110  # longer `configs=[...]` keywords are split one config per line


class EditError(ValueError):
    """The kernel or its decorator could not be found, or the source does not parse."""


@dataclass(frozen=True)
class TextEdit:
    start: int  # code-point offset into the source
    end: int
    new_text: str


def apply_edit(source: str, edit: TextEdit) -> str:
    return source[: edit.start] + edit.new_text + source[edit.end :]


def set_config(source: str, kernel: str, config: Mapping[str, Any], index: int | None = None) -> TextEdit:
    """Make the decorator of `kernel` use `config`.

    With `index` and an existing `configs=[...]` list long enough, only element `index` is replaced (one
    config per shape set); otherwise the decorator gets `config=...` (replacing `config=` or `configs=`).
    """
    deco = _Decorator.find(source, kernel)
    text = format_config(Config(config), deco.config_name, deco.quote)
    if index is not None and deco.configs_kw is not None and isinstance(deco.configs_kw.value, ast.List):
        elts = deco.configs_kw.value.elts
        if index < len(elts):
            return deco.replace_node(elts[index], text)
    return deco.set_keyword("config", text)


def set_configs(source: str, kernel: str, configs: Sequence[Mapping[str, Any]]) -> TextEdit:
    """Make the decorator of `kernel` use `configs=[...]` (one per shape set, in order)."""
    deco = _Decorator.find(source, kernel)
    items = [format_config(Config(c), deco.config_name, deco.quote) for c in configs]
    inline = "[" + ", ".join(items) + "]"
    if deco.keyword_column() + len("configs=") + len(inline) <= INLINE_LIMIT:
        return deco.set_keyword("configs", inline)
    indent = " " * deco.keyword_indent()
    inner = indent + " " * INDENT_STEP
    block = "[\n" + "".join(f"{inner}{item},\n" for item in items) + indent + "]"
    return deco.set_keyword("configs", block)


def config_assignments(source: str, kernel: str, values: Mapping[str, Any]) -> str:
    """`block_sizes=[1, 256], pallas_loop_type="unroll"`: exactly how `set_config` writes these keys in this
    file (its quote style), for titles that show what an edit writes."""
    quote = _Decorator.find(source, kernel).quote
    return ", ".join(f"{k}={_literal(v, quote)}" for k, v in values.items())


def format_config(config: Config, name: str = "helion.Config", quote: str = "'") -> str:
    """`helion.Config(block_sizes=[64, 128], pallas_loop_type='unroll')` with the file's quote style."""
    body = ", ".join(f"{k}={_literal(v, quote)}" for k, v in config.items())
    return f"{name}({body})"


def _literal(value: Any, quote: str) -> str:
    if isinstance(value, str):
        text = repr(value)
        if quote == '"' and '"' not in value and "'" not in value:
            text = '"' + text[1:-1] + '"'
        return text
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_literal(v, quote) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k, quote)}: {_literal(v, quote)}" for k, v in value.items()) + "}"
    return repr(value)


# the decorators the compiler compiles (frontend/module.py): `jit` is upstream's alias of `kernel`, and
# `aot_kernel` takes config= / configs= as `kernel` does
KERNEL_DECORATOR_NAMES = frozenset({"kernel", "jit", "aot_kernel"})


def _is_kernel_ref(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in KERNEL_DECORATOR_NAMES
    return isinstance(node, ast.Attribute) and node.attr in KERNEL_DECORATOR_NAMES


def find_kernel_decorator(tree: ast.Module, kernel: str) -> tuple[ast.FunctionDef, ast.expr]:
    """The function `kernel` and its `@helion.kernel` / `@kernel(...)` decorator expression."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == kernel:
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if _is_kernel_ref(target):
                    return node, deco
    raise EditError(f"no @helion.kernel function named {kernel!r} in this file")


class _Decorator:
    """A located kernel decorator plus the source it came from."""

    def __init__(self, source: str, tree: ast.Module, deco: ast.expr):
        self.source = source
        self.tree = tree
        self.node = deco
        self.lines = source.splitlines(keepends=True)
        self._line_starts = [0]
        for line in self.lines:
            self._line_starts.append(self._line_starts[-1] + len(line))
        self.call = deco if isinstance(deco, ast.Call) else None
        keywords = self.call.keywords if self.call else []
        self.config_kw = next((k for k in keywords if k.arg == "config"), None)
        self.configs_kw = next((k for k in keywords if k.arg == "configs"), None)
        self.config_name = self._config_name()
        self.quote = self._quote()

    @classmethod
    def find(cls, source: str, kernel: str) -> _Decorator:
        try:
            tree = parse_python(source)
        except SyntaxError as exc:
            raise EditError(f"the file does not parse (line {exc.lineno}): {exc.msg}") from None
        _, deco = find_kernel_decorator(tree, kernel)
        return cls(source, tree, deco)

    # -- offsets -----------------------------------------------------------------------------------
    def offset(self, lineno: int, col_bytes: int) -> int:
        """Code-point offset of an ast (1-based line, UTF-8 byte column) position."""
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        return self._line_starts[lineno - 1] + len(
            line.encode("utf-8")[:col_bytes].decode("utf-8", "replace")
        )

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)

    def line_indent(self, lineno: int) -> int:
        line = self.lines[lineno - 1]
        return len(line) - len(line.lstrip(" \t"))

    # -- style -------------------------------------------------------------------------------------
    def _config_name(self) -> str:
        """`Config` when the file imports it from helion (and the decorator is bare `kernel`)."""
        target = self.call.func if self.call else self.node
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            return f"{target.value.id}.Config"
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == "helion":
                for alias in node.names:
                    if alias.name == "Config":
                        return alias.asname or "Config"
        return "helion.Config"

    def _quote(self) -> str:
        """Follow the quote style of the decorator, else of the file's string literals."""
        for scope in (self.node, self.tree):
            for node in ast.walk(scope):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and hasattr(node, "lineno"):
                    first = self.source[self.start(node) : self.start(node) + 1]
                    if first in ("'", '"'):
                        return first
        return "'"

    def keyword_column(self) -> int:
        """Column where a `config(s)=` keyword would start (for line-length decisions)."""
        kw = self.config_kw or self.configs_kw
        if kw is not None:
            return kw.col_offset
        if self.call is not None and self._multiline():
            return self.keyword_indent()
        return self.node.end_col_offset

    def keyword_indent(self) -> int:
        kw = self.config_kw or self.configs_kw
        if kw is not None:
            return self.line_indent(kw.lineno)
        args = self._args()
        if self.call is not None and self._multiline() and args:
            return self.line_indent(args[-1].lineno)
        return self.line_indent(self.node.lineno) + (INDENT_STEP if self._multiline() else 0)

    def _args(self) -> list[ast.AST]:
        if self.call is None:
            return []
        return sorted([*self.call.args, *self.call.keywords], key=lambda n: (n.lineno, n.col_offset))

    def _multiline(self) -> bool:
        return self.node.end_lineno != self.node.lineno

    # -- edits -------------------------------------------------------------------------------------
    def replace_node(self, node: ast.AST, text: str) -> TextEdit:
        return TextEdit(self.start(node), self.end(node), text)

    def set_keyword(self, name: str, value_text: str) -> TextEdit:
        """Give the decorator `name=value_text`, replacing `config=` / `configs=` if present."""
        same = self.config_kw if name == "config" else self.configs_kw
        other = self.configs_kw if name == "config" else self.config_kw
        if same is not None:
            return self.replace_node(same.value, value_text)
        if other is not None:
            return TextEdit(self.start(other), self.end(other.value), f"{name}={value_text}")
        if self.call is None:  # bare @helion.kernel
            pos = self.end(self.node)
            return TextEdit(pos, pos, f"({name}={value_text})")
        return self._insert_keyword(f"{name}={value_text}")

    def _insert_keyword(self, kw_text: str) -> TextEdit:
        assert self.call is not None
        close = self.end(self.call) - 1  # the ')' of the call
        args = self._args()
        if not args:
            return TextEdit(close, close, kw_text)
        last_end = self.end(args[-1])
        comma = self._comma_after(last_end, close)
        close_line_start = self.source.rfind("\n", 0, close) + 1
        paren_alone = (
            args[-1].end_lineno != self.call.end_lineno and not self.source[close_line_start:close].strip()
        )
        if paren_alone:  # one argument per line: add ours as the last line, keeping comments in place
            line = (
                " " * self.line_indent(args[-1].lineno) + kw_text + ("," if comma is not None else "") + "\n"
            )
            if comma is not None:
                return TextEdit(close_line_start, close_line_start, line)
            between = self.source[last_end:close_line_start]
            return TextEdit(last_end, close_line_start, "," + between + line)
        if comma is not None:
            return TextEdit(comma + 1, comma + 1, f" {kw_text},")
        return TextEdit(last_end, last_end, f", {kw_text}")

    def _comma_after(self, start: int, stop: int) -> int | None:
        """Offset of a ',' token between `start` and `stop` (skipping comments), if any."""
        segment = self.source[start:stop]
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(segment).readline))
        except (tokenize.TokenError, SyntaxError):
            tokens = []
        seg_lines = segment.splitlines(keepends=True)
        starts = [0]
        for line in seg_lines:
            starts.append(starts[-1] + len(line))
        for tok in tokens:
            if tok.type == tokenize.OP and tok.string == ",":
                return start + starts[tok.start[0] - 1] + tok.start[1]
        return None
