"""Inlining: replace every `call` by the callee's body, recursively.

Runs first in the default pipeline so that simplify, cse and codegen see one
straight-line body per kernel. The callee's dimension symbols are bound to the
caller's dimensions (`bind_dims`) and substituted in result types and in every
dimension-valued attribute (`shape`, `start`, `stop`, the `value` of `dim`).
Inlined ops keep their own locations; all functions are kept.

    func @sq(%x: f32[N]) -> f32[N] {               func @f(%y: f32[M]) -> f32[M] {
      %0 = mul %x, %x : f32[N]                       %0 = mul %y, %y : f32[M]
      return %0                          ==>         return %0
    }                                              }
    func @f(%y: f32[M]) -> f32[M] {
      %0 = call %y {callee = @sq} : f32[M]
      return %0
    }
"""
from __future__ import annotations

from typing import Any, Mapping

from adc.errors import CompileError
from adc.ir.core import Attrs, Func, Module, Op, Value
from adc.ir.ops import bind_dims, substitute
from adc.ir.trampoline import trampoline
from adc.ir.types import Dim, SymDim, TensorType


def inline(module: Module) -> Module:
    return Module({f.name: inline_func(f, module) for f in module}, module.name)


def callees(func: Func) -> tuple[str, ...]:
    """The functions `func` calls, in order of appearance: what inlining copies into it."""
    return tuple(op.attrs["callee"] for op in func.ops if op.name == "call")


def inline_func(func: Func, module: Module) -> Func:
    if not callees(func):
        return func
    values: dict[Value, Value] = {}
    ops: list[Op] = []
    trampoline(_inline_body(func, module, values, {}, {func.name: None}, ops))
    returns = tuple(values.get(v, v) for v in func.returns)
    return Func(func.name, func.params, tuple(ops), returns, func.loc)


def _inline_body(func: Func, module: Module, values: dict[Value, Value], dims: Mapping[str, Dim],
                 path: dict[str, None], ops: list[Op]):
    """Append to `ops` those of `func` with operands renamed by `values` and dimensions by `dims`,
    each call replaced by its callee's (a generator for the trampoline: a chain of calls is as
    long as the program). `path` holds the functions being inlined, outermost first.

    Ops of the function being inlined into (a one-entry `path`) keep their results; ops copied
    out of a callee get fresh ones, as a callee may be inlined several times.
    """
    for op in func.ops:
        operands = tuple(values.get(v, v) for v in op.operands)
        if op.name == "call":
            callee = module[op.attrs["callee"]]
            if callee.name in path:
                raise CompileError(f"cannot inline the recursive call of @{callee.name} "
                                   f"({' -> '.join([*path, callee.name])})", op.loc)
            inner: dict[Value, Value] = dict(zip(callee.params, operands))
            bound = _renamed(bind_dims(callee.param_types, [a.type for a in operands]))
            path[callee.name] = None
            yield _inline_body(callee, module, inner, bound, path, ops)
            path.popitem()
            values.update(zip(op.results, (inner.get(v, v) for v in callee.returns)))
        elif len(path) > 1:
            ops.append(_copied(op, operands, values, dims))
        else:
            ops.append(op if operands == op.operands else Op(op.name, operands, op.attrs, op.results, op.loc))


def _renamed(dims: dict[str, Dim]) -> dict[str, Dim]:
    """The bindings that change a dimension: none when each symbol binds to itself (the callee's
    `N` is the caller's `N`), the usual case, whose types and attributes are then kept as they are."""
    return {} if all(d == SymDim.symbol(s) for s, d in dims.items()) else dims


def _copied(op: Op, operands: tuple[Value, ...], values: dict[Value, Value], dims: Mapping[str, Dim]) -> Op:
    results = tuple(Value(_substitute_type(r.type, dims) if dims else r.type) for r in op.results)
    values.update(zip(op.results, results))
    attrs = Attrs({k: _substitute_attr(v, dims) for k, v in op.attrs.items()}) if dims else op.attrs
    return Op(op.name, operands, attrs, results, op.loc)


def _substitute_type(t: TensorType, dims: Mapping[str, Dim]) -> TensorType:
    return t.with_shape(substitute(d, dims) for d in t.shape)


def _substitute_attr(value: Any, dims: Mapping[str, Dim]) -> Any:
    """Every symbolic dimension in an attribute, at any nesting depth, is a dimension to rename."""
    if isinstance(value, SymDim):
        return substitute(value, dims)
    if isinstance(value, tuple):
        return tuple(_substitute_attr(v, dims) for v in value)
    return value
