"""Evaluating expressions of a kernel abstractly: names, attributes, calls, operators, subscripts.

`ExpressionEvaluator` is the part of the tracer that computes values; `tracer.Tracer` adds statements
(kernel_statements.py), loops (device_loops.py) and loads/stores (tensor_access.py: a subscript of a host
tensor inside a device loop becomes `self.load`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

import torch

from ..ir.tile_ir import Value
from ..support.diagnostics import Range, UserError
from .callable_args import at_call
from .limits import check_binary
from .ops import BINARY
from .static_args import unwrap
from .upstream_names import UPSTREAM_NAMES
from .values import Closure, Module, NamedConst, Tile, TileId, lambda_def

BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor",
    ast.LShift: "lshift", ast.RShift: "rshift", ast.MatMult: "matmul",
}
CMPOPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}


class ExpressionEvaluator:
    """Needs from its subclass: env, info, dispatch, ops, in_device, call/inline, load, budget (limits.py)."""

    def lookup(self, name: str, rng: Range) -> Any:
        if name in self.env:
            return self.env[name]
        if name in self.info.imports:
            qualname = self.info.imports[name]
            return UPSTREAM_NAMES[qualname] if qualname in UPSTREAM_NAMES else Module(qualname)
        if name in self.info.constants:
            value = self.info.constants[name]
            return NamedConst(name, value) if isinstance(value, float) else value
        if name in self.info.functions:
            return self.info.functions[name]
        if name in _BUILTINS:
            return Module(f"builtins.{name}")
        raise UserError("HPL102", f"unknown name `{name}`", rng)

    def eval(self, node: ast.expr) -> Any:
        rng = Range.of(node)
        self.budget.step(rng)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.lookup(node.id, rng)
        if isinstance(node, ast.Attribute):
            return self.dispatch.attribute(self.eval(node.value), node.attr, rng)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp):
            op = BINOPS.get(type(node.op))
            if op is None:
                raise UserError("HPL101", "unsupported operator", rng)
            return self.binop(op, self.eval(node.left), self.eval(node.right), rng)
        if isinstance(node, ast.UnaryOp):
            return self.unaryop(node, self.eval(node.operand), rng)
        if isinstance(node, ast.Compare):
            return self.compare(node, rng)
        if isinstance(node, ast.BoolOp):
            return self.boolop(node, rng)
        if isinstance(node, ast.Subscript):
            return self.subscript(node, rng)
        if isinstance(node, ast.Tuple):
            return tuple(self.elements(node.elts))
        if isinstance(node, ast.List):
            return self.elements(node.elts)
        if isinstance(node, ast.Slice):
            parts = [None if p is None else self.eval(p) for p in (node.lower, node.upper, node.step)]
            return slice(*parts)
        if isinstance(node, ast.IfExp):
            cond = self.eval(node.test)
            if isinstance(cond, Value):
                raise UserError("HPL101", "conditional expressions on tensors are not supported; use torch.where", rng)
            return self.eval(node.body if cond else node.orelse)
        if isinstance(node, ast.JoinedStr):
            return ""
        if isinstance(node, ast.Lambda):
            return Closure(lambda_def(node), dict(self.env))
        raise UserError("HPL101", f"`{type(node).__name__}` expressions are not supported in a kernel", rng)

    def elements(self, nodes: list[ast.expr]) -> list[Any]:
        """Items of a tuple/list display or of call arguments; `*seq` splices a tuple, list or size."""
        out = []
        for a in nodes:
            if isinstance(a, ast.Starred):
                value = self.eval(a.value)
                if isinstance(value, torch.Size):
                    value = tuple(value)
                if not isinstance(value, tuple | list):
                    raise UserError("HPL101", "only tuples and lists can be unpacked with *", Range.of(a))
                out.extend(value)
            else:
                out.append(self.eval(a))
        return out

    def call(self, node: ast.Call) -> Any:
        rng = Range.of(node)
        func = self.eval(node.func)
        args = self.elements(node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise UserError("HPL101", "**kwargs are not supported in a kernel", Range.of(kw.value))
            kwargs[kw.arg] = self.eval(kw.value)
        if isinstance(func, ast.FunctionDef):
            return self.inline(func, args, kwargs, rng)
        if isinstance(func, Closure):
            return self.inline(at_call(func.fn, node) if func.foreign else func.fn, args, kwargs, rng, func.env)
        return self.dispatch.call(func, args, kwargs, rng)

    def binop(self, op: str, a: Any, b: Any, rng: Range) -> Any:
        if isinstance(a, Tile | TileId) or isinstance(b, Tile | TileId):
            a, b = self.dispatch.tile_scalar(a, rng), self.dispatch.tile_scalar(b, rng)
        if isinstance(a, Value) or isinstance(b, Value):
            return self.ops.binary(op, a, b, rng)
        a, b = unwrap(a), unwrap(b)
        check_binary(op, a, b, rng)
        try:
            return _PYBINOPS[op](a, b)
        except ZeroDivisionError:
            raise UserError("HPL105", "division by zero", rng) from None
        except (TypeError, KeyError, ValueError, OverflowError) as exc:
            raise UserError("HPL105", f"cannot apply `{BINARY.get(op, op)}`: {exc}", rng) from None

    def unaryop(self, node: ast.UnaryOp, v: Any, rng: Range) -> Any:
        if isinstance(v, Value):
            if isinstance(node.op, ast.USub):
                return self.ops.unary("neg", v, rng)
            if isinstance(node.op, ast.UAdd):
                return v
            if isinstance(node.op, ast.Invert | ast.Not):
                name = "logical_not" if v.dtype == torch.bool or isinstance(node.op, ast.Not) else "bitwise_not"
                return self.ops.unary(name, v, rng)
        v = unwrap(v)
        try:
            return {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Not: lambda x: not x,
                    ast.Invert: lambda x: ~x}[type(node.op)](v)
        except TypeError as exc:
            raise UserError("HPL105", str(exc), rng) from None

    def compare(self, node: ast.Compare, rng: Range) -> Any:
        left = self.eval(node.left)
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.eval(right_node)
            if isinstance(op, ast.Is | ast.IsNot):
                r = (left is right) if isinstance(op, ast.Is) else (left is not right)
            elif isinstance(op, ast.In | ast.NotIn):
                raise UserError("HPL101", "`in` is not supported in kernels", rng)
            else:
                r = self.binop(CMPOPS[type(op)], left, right, rng)
            if isinstance(r, Value) and len(node.ops) > 1:
                raise UserError("HPL101", "chained comparisons of tensors are not supported", rng)
            result = r if result is True else (result and r)
            left = right
        return result

    def boolop(self, node: ast.BoolOp, rng: Range) -> Any:
        values = [self.eval(v) for v in node.values]
        if any(isinstance(v, Value) for v in values):
            raise UserError("HPL101", "`and`/`or` on tensors is not supported; use & and |", rng)
        if isinstance(node.op, ast.And):
            return all(values)
        return any(values)

    def subscript(self, node: ast.Subscript, rng: Range) -> Any:
        base = self.eval(node.value)
        index = self.eval(node.slice)
        if isinstance(base, Value) and base.space == "host" and self.in_device:
            return self.load(base, index, rng)
        if isinstance(base, Value):
            return self.dispatch.value_index(base, index, rng)
        if isinstance(base, tuple | list | torch.Size | str):
            try:
                return base[index]
            except (IndexError, TypeError) as exc:
                raise UserError("HPL105", str(exc), rng) from None
        raise UserError("HPL101", f"cannot index a {type(base).__name__}", rng)


_PYBINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
    "pow": lambda a, b: a**b, "and": lambda a, b: a & b,
    "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "lshift": lambda a, b: a << b,
    "rshift": lambda a, b: a >> b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}

_BUILTINS = {"float", "int", "bool", "min", "max", "abs", "len", "range", "tuple", "list", "round", "print",
             "isinstance", "divmod", "slice"}
