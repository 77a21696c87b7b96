"""Common subexpression elimination within each function.

Two ops compute the same values when they have the same name, the same
operands (after earlier merges), the same attributes and the same result
types; every op is pure, so the later one is dropped and its uses read the
earlier one's results. Attributes are compared by their printed form, which
keeps -0.0 apart from 0.0 and 1 apart from 1.0 and true; the operands of a
commutative op (the "commutative" trait) in either order are the same (the product
rule of x*x gives dx*x and x*dx). Functions are not merged with each other.

    %0 = exp %x : f32[N]                           %0 = exp %x : f32[N]
    %1 = exp %x : f32[N]              ==>          %1 = add %0, %0 : f32[N]
    %2 = add %0, %1 : f32[N]                       return %1
    return %2
"""
from __future__ import annotations

from adc.ir.core import Func, Module, Op, Value
from adc.ir.ops import OPS
from adc.ir.printer import format_attr


def cse(module: Module) -> Module:
    return Module({f.name: cse_func(f) for f in module}, module.name)


def _key(op: Op, operands: tuple[Value, ...]) -> tuple:
    attrs = tuple((k, format_attr(v)) for k, v in op.attrs.items())
    if "commutative" in OPS[op.name].traits:
        operands = frozenset(operands)
    return (op.name, operands, attrs, tuple(r.type for r in op.results))


def cse_func(func: Func) -> Func:
    replaced: dict[Value, Value] = {}
    seen: dict[tuple, Op] = {}
    ops = []
    for op in func.ops:
        operands = tuple(replaced.get(v, v) for v in op.operands)
        first = seen.get(_key(op, operands))
        if first is not None:
            replaced.update(zip(op.results, first.results))
            continue
        if operands != op.operands:
            op = Op(op.name, operands, op.attrs, op.results, op.loc)
        seen[_key(op, operands)] = op
        ops.append(op)
    if not replaced:
        return func
    returns = tuple(replaced.get(v, v) for v in func.returns)
    return Func(func.name, func.params, tuple(ops), returns, func.loc)
