"""Dead code elimination: drop ops none of whose results is used.

Runs last in the default pipeline, after simplify and cse have orphaned ops.
Every op of the IR is pure, so an op is live exactly when one of its results
reaches a `return` through live ops; one backward sweep finds them all.

    %0 = exp %x : f32[N]                           %0 = mul %x, %x : f32[N]
    %1 = mul %x, %x : f32[N]          ==>          return %0
    return %1
"""
from __future__ import annotations

from adc.ir.core import Func, Module, Value


def eliminate_dead_code(module: Module) -> Module:
    return Module({f.name: eliminate_dead_code_func(f) for f in module}, module.name)


def eliminate_dead_code_func(func: Func) -> Func:
    live: set[Value] = set(func.returns)
    kept = []
    for op in reversed(func.ops):
        if any(r in live for r in op.results):
            kept.append(op)
            live.update(op.operands)
    if len(kept) == len(func.ops):
        return func
    return Func(func.name, func.params, tuple(reversed(kept)), func.returns, func.loc)
