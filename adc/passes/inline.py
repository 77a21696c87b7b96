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
from adc.ir.types import Dim, SymDim, TensorType


def inline(module: Module) -> Module:
    return Module({f.name: inline_func(f, module) for f in module}, module.name)


def inline_func(func: Func, module: Module) -> Func:
    if not any(op.name == "call" for op in func.ops):
        return func
    values: dict[Value, Value] = {}
    ops = _inline_body(func, module, values, {}, (func.name,))
    returns = tuple(values.get(v, v) for v in func.returns)
    return Func(func.name, func.params, tuple(ops), returns, func.loc)


def _inline_body(func: Func, module: Module, values: dict[Value, Value], dims: Mapping[str, Dim],
                 stack: tuple[str, ...]) -> list[Op]:
    """The ops of `func` with operands renamed by `values` and dimensions by `dims`.

    Ops of the function being inlined into (a one-entry `stack`) keep their
    results; ops copied out of a callee get fresh ones, as a callee may be
    inlined several times.
    """
    ops: list[Op] = []
    for op in func.ops:
        operands = tuple(values.get(v, v) for v in op.operands)
        if op.name == "call":
            ops += _expand_call(op, operands, module, values, stack)
        elif len(stack) > 1:
            ops.append(_copied(op, operands, values, dims))
        else:
            ops.append(op if operands == op.operands else Op(op.name, operands, op.attrs, op.results, op.loc))
    return ops


def _expand_call(op: Op, args: tuple[Value, ...], module: Module, values: dict[Value, Value],
                 stack: tuple[str, ...]) -> list[Op]:
    callee = module[op.attrs["callee"]]
    if callee.name in stack:
        raise CompileError(f"cannot inline the recursive call of @{callee.name} "
                           f"({' -> '.join(stack + (callee.name,))})", op.loc)
    dims = bind_dims(callee.param_types, [a.type for a in args])
    inner: dict[Value, Value] = dict(zip(callee.params, args))
    ops = _inline_body(callee, module, inner, dims, stack + (callee.name,))
    values.update(zip(op.results, (inner.get(v, v) for v in callee.returns)))
    return ops


def _copied(op: Op, operands: tuple[Value, ...], values: dict[Value, Value], dims: Mapping[str, Dim]) -> Op:
    results = tuple(Value(_substitute_type(r.type, dims)) for r in op.results)
    values.update(zip(op.results, results))
    attrs = Attrs({k: _substitute_attr(v, dims) for k, v in op.attrs.items()})
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
