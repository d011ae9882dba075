"""Source rewrite that lets Tiles act as indices: `x[tile_m, :]` becomes `x[__hl_key__((tile_m, slice(None)), x)]`,
and as sizes: `t.reshape([tile_b, 2, half])` becomes `t.reshape(__hl_sizes__([tile_b, 2, half]))`.

Inside a device loop (`for ... in hl.tile(...)` / `hl.grid` / `hl.jagged_tile`) a read `x[...]` is a load, a value
of its own, as Helion compiles it: it becomes `__hl_load__(x[...])`, a copy where torch's indexing gave a view, so
that `cb_local *= decay` on a loaded block does not write into `cb` (upstream mamba2_chunk_scan: every later head
then read the scaled block again, and the eager run was off by up to 10^28 where the kernel was right). Host code
keeps torch's views, as upstream's host code does.

Only the subscript key, the size arguments of torch's shape-taking calls and (in device code) a read as a whole
are wrapped, so loads, stores, `+=` and `del` keep Python's own evaluation order; the key and size functions are
the identity for anything that holds no Tile. Annotations are left alone.
"""

from __future__ import annotations

import ast

KEY_NAME = "__hl_key__"
SLICE_NAME = "__hl_slice__"
SIZES_NAME = "__hl_sizes__"
LOAD_NAME = "__hl_load__"
DEVICE_LOOPS = frozenset({"tile", "grid", "jagged_tile"})  # hl functions whose `for` loop is device code
# shape-taking tensor methods, and torch functions (`torch.zeros(...)`): a Tile among their sizes is a length
SIZE_METHODS = frozenset({"reshape", "view", "expand", "broadcast_to", "unflatten", "new_zeros", "new_ones",
                          "new_empty", "new_full"})
SIZE_FUNCTIONS = frozenset({"zeros", "ones", "empty", "full", "reshape", "broadcast_to"})


def _slice_call(node: ast.Slice) -> ast.expr:
    parts = [part if part is not None else ast.Constant(None) for part in (node.lower, node.upper, node.step)]
    return ast.copy_location(ast.Call(ast.Name(SLICE_NAME, ast.Load()), parts, []), node)


def _sizes_call(node: ast.expr) -> ast.expr:
    if isinstance(node, ast.Starred):
        node.value = _sizes_call(node.value)
        return node
    return ast.copy_location(ast.Call(ast.Name(SIZES_NAME, ast.Load()), [node], []), node)


def _takes_sizes(func: ast.expr) -> bool:
    if not isinstance(func, ast.Attribute):
        return False
    torch_function = isinstance(func.value, ast.Name) and func.value.id == "torch" and func.attr in SIZE_FUNCTIONS
    return torch_function or func.attr in SIZE_METHODS  # hl.zeros is not one: it takes the Tiles themselves


def _device_loop(node: ast.For) -> bool:
    """`for ... in hl.tile(...)` (or hl.grid, hl.jagged_tile, by any module alias)."""
    call = node.iter
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in DEVICE_LOOPS


class _WrapKeys(ast.NodeTransformer):
    def __init__(self) -> None:
        self.device_depth = 0

    def visit_For(self, node: ast.For) -> ast.For:
        device = _device_loop(node)
        self.device_depth += device
        try:
            self.generic_visit(node)
        finally:
            self.device_depth -= device
        return node

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        if _takes_sizes(node.func):
            full = node.func.attr in ("full", "new_full")  # only the size: the fill value is a value
            node.args = [_sizes_call(a) if not full or i == 0 else a for i, a in enumerate(node.args)]
            for kw in node.keywords:
                if kw.arg in ("size", "shape"):
                    kw.value = _sizes_call(kw.value)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        node = self._wrap_key(node)
        if self.device_depth and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Call(ast.Name(LOAD_NAME, ast.Load()), [node], []), node)
        return node

    def _wrap_key(self, node: ast.Subscript) -> ast.Subscript:
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
