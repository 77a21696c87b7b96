"""The order lowering emits a function's ops in, and fusion's plan of that order.

A function's own lowering (lower.py), which carves its block of temporaries, and its
parent's, which sizes the block it passes the function as a region (temporaries.py), both
take the function from `as_lowered`, so the two cannot disagree. The one reordering: ops
computing only scalars the function returns (a mean loss) go last, so the nests over rows
around them run strip by strip (strips.py).
"""
from __future__ import annotations

from adc.codegen.lowering.fusion import Plan, plan
from adc.ir.core import Func, Op, Value


def as_lowered(func: Func) -> tuple[Func, Plan]:
    """`func` in the order lowering emits it and fusion's plan of that order: what a function's
    own lowering carves its block into, and what its parent sizes the block it passes by, so the
    two cannot disagree. (The parent once planned a region in its source order: moving the ops of
    scalar results last changes what fusion materializes, and a reversed loop's body wrote
    temporaries past the end of the block it was given.)"""
    func = _scalar_results_last(func)
    return func, plan(func)


def _scalar_results_last(func: Func) -> Func:
    """`func` with the ops computing only scalars it returns (a mean loss) moved last, before
    fusion plans it: the nests over rows before and after them (a softmax's, its gradient's)
    then run strip by strip."""
    returned = set(func.returns)
    last: set[int] = set()
    users: dict[Value, list[Op]] = {}
    for op in func.ops:
        for v in op.operands:
            users.setdefault(v, []).append(op)
    for op in reversed(func.ops):
        if op.results and all(not r.type.rank and (r in returned or users.get(r)) for r in op.results) and all(
                id(user) in last for r in op.results for user in users.get(r, ())):
            last.add(id(op))
    if not last:
        return func
    ops = [op for op in func.ops if id(op) not in last] + [op for op in func.ops if id(op) in last]
    return Func(func.name, func.params, tuple(ops), func.returns, func.loc)
