"""Source rewrite that lets Tiles act as indices: `x[tile_m, :]` becomes `x[__hl_key__((tile_m, slice(None)), x)]`.

Only the subscript key is wrapped, so loads, stores, `+=` and `del` keep Python's own evaluation order;
the key function is the identity for anything that holds no Tile. Annotations are left alone.
"""

from __future__ import annotations

import ast

KEY_NAME = "__hl_key__"
SLICE_NAME = "__hl_slice__"


def _slice_call(node: ast.Slice) -> ast.expr:
    parts = [part if part is not None else ast.Constant(None) for part in (node.lower, node.upper, node.step)]
    return ast.copy_location(ast.Call(ast.Name(SLICE_NAME, ast.Load()), parts, []), node)


class _WrapKeys(ast.NodeTransformer):
    def visit_Subscript(self, node: ast.Subscript) -> ast.Subscript:
        self.generic_visit(node)
        key = node.slice
        if isinstance(key, ast.Slice):  # `a[i:j]`: no Tile can hide in a plain slice
            return node
        if isinstance(key, ast.Tuple):
            elts = [_slice_call(e) if isinstance(e, ast.Slice) else e for e in key.elts]
            key = ast.copy_location(ast.Tuple(elts, ast.Load()), key)
        args = [key]
        if isinstance(node.value, ast.Name):  # the tensor itself, so size-1 dims can broadcast against tiles
            args.append(ast.Name(node.value.id, ast.Load()))
        node.slice = ast.copy_location(ast.Call(ast.Name(KEY_NAME, ast.Load()), args, []), key)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        returns, node.returns = node.returns, None
        self.generic_visit(node)
        node.returns = returns
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AnnAssign:
        node.target = self.visit(node.target)
        if node.value is not None:
            node.value = self.visit(node.value)
        return node


def rewrite_module(tree: ast.Module) -> ast.Module:
    """Wrap every subscript key in the module (in place) and fill in locations."""
    _WrapKeys().visit(tree)
    return ast.fix_missing_locations(tree)
