"""Sums accumulated by a loop are summed once, after it: `acc = acc + sum(e)` carries `e` unreduced.

The reverse of a loop accumulates the cotangent of each value its body broadcasts (a scalar
parameter, a bias) as a carried sum, `acc + reduce_sum(e)` every iteration: a reduction, its
own loop nest, per iteration. Carrying `e`'s shape instead, `acc_e + e` is elementwise work
that fuses into the body's other nests, and one reduction after the loop finishes the sum:

    %0 = for %n, %acc, %x {body = @step, carried = 1}     @step(%i, %acc: f64, %x): %e = ...
                                                               %s = reduce_sum %e {axes = [0]}
                                                               %a = add %acc, %s ; return %a
      ==>  %z = broadcast 0.0 to e's shape
           %w = for %n, %z, %x {body = @step_unreduced, carried = 1}    (... %a = add %acc, %e)
           %t = reduce_sum %w {axes = [0]}
           %0 = add %acc, %t

A carried value qualifies when its body's only use of it adds (or subtracts) a sum used nowhere
else and returns the total for it alone, and the summed value's shape does not depend on the iteration
(a scan's own length). The loop then carries a buffer of the summed operand's size instead of
the sum's (two, alternating): memory for reductions. Only code generation runs this pass
(pipeline.LOWERING): a loop differentiated afterwards would store the wider state.
"""
from __future__ import annotations

from collections import Counter

from adc.ir.builder import Builder
from adc.ir.core import Attrs, Func, FuncRef, Module, Op, Value
from adc.ir.ops import OPS
from adc.passes.dce import without_orphan_regions
from adc.passes.regions import fresh_name



def sink_sums(module: Module) -> Module:
    """`module` with the sums its `for` and `scan` loops accumulate summed after them."""
    funcs = dict(module.funcs)
    for name in list(funcs):
        funcs[name] = sink_sums_func(funcs[name], funcs)
    return without_orphan_regions(module, funcs)


def sink_sums_func(func: Func, funcs: dict[str, Func]) -> Func:
    """`func` with its loops' accumulated sums summed after them (new bodies added to `funcs`)."""
    ops: list[Op] = []
    for op in func.ops:
        sunk = _sunk(op, funcs) if OPS[op.name].has("counted") else None
        if sunk is None:
            ops.append(op)
        else:
            ops += sunk
    if len(ops) == len(func.ops):
        return func
    return Func(func.name, func.params, tuple(ops), func.returns, func.loc)


def _sunk(loop: Op, funcs: dict[str, Func]) -> list[Op] | None:
    """The ops replacing `loop` (zeros, the loop carrying unreduced sums, their sums and totals),
    or None when none of its carried values is an accumulated sum."""
    lead, k = OPS[loop.name].body_leads, loop.attrs["carried"]
    body = funcs[loop.attrs["body"]]
    uses = Counter(v for op in body.ops for v in op.operands) + Counter(body.returns)
    producers = {r: op for op in body.ops for r in op.results}
    sums = {j: s for j in range(k) if (s := _accumulated_sum(body, lead + j, j, uses, producers)) is not None}
    if not sums:
        return None
    b = Builder(funcs, loop.loc)
    operands, params, returns = list(loop.operands), list(body.params), list(body.returns)
    replaced: dict[Value, Value] = {}       # in the body: an accumulated total -> the unreduced one
    for j, (total, summed) in sums.items():
        wide = summed.operands[0]
        zero = b.op("constant", dtype=wide.type.dtype, value=0.0)
        operands[lead + j] = b.op("broadcast", zero, dims=[], shape=list(wide.type.shape))
        params[lead + j] = Value(wide.type, params[lead + j].name)
        replaced[total.result] = Value(wide.type, total.result.name)
        returns[j] = replaced[total.result]
    totals = {id(total): j for j, (total, _) in sums.items()}
    summed_ops = {id(summed) for _, summed in sums.values()}
    body_ops = []
    for op in body.ops:
        if id(op) in totals:        # acc + sum(e) -> acc + e
            j = totals[id(op)]
            op = Op(op.name, (params[lead + j], sums[j][1].operands[0]), Attrs({}), (replaced[op.result],), op.loc)
        if id(op) not in summed_ops:
            body_ops.append(op)
    new_body = Func(fresh_name(funcs, f"{body.name}_unreduced"), tuple(params), tuple(body_ops), tuple(returns),
                    body.loc)
    funcs[new_body.name] = new_body
    results = [Value(params[lead + j].type) if j in sums else r for j, r in enumerate(loop.results)]
    b.ops.append(Op(loop.name, tuple(operands), Attrs(dict(loop.attrs, body=FuncRef(new_body.name))),
                    tuple(results), loop.loc))
    for j, (_, summed) in sums.items():
        total = b.op("reduce_sum", results[j], axes=list(summed.attrs["axes"]))
        b.ops.append(Op("add", (loop.operands[lead + j], total), Attrs({}), (loop.results[j],), loop.loc))
    return b.ops


def _accumulated_sum(body: Func, param: int, j: int, uses: Counter, producers: dict[Value, Op]
                     ) -> tuple[Op, Op] | None:
    """(the add or sub making the total, the reduce_sum it adds) when the body's `param` (carried
    value j) is only added to a sum used nowhere else, or has it subtracted, and the total is
    returned for j alone."""
    p = body.params[param]
    total = producers.get(body.returns[j])
    if (total is None or total.name not in ("add", "sub") or uses[p] != 1 or p not in total.operands
            or uses[total.result] != 1 or not p.type.dtype.is_float
            or (total.name == "sub" and total.operands[0] is not p)):
        return None
    other = total.operands[1] if total.operands[0] is p else total.operands[0]
    summed = producers.get(other)
    if (summed is None or summed.name != "reduce_sum" or uses[other] != 1
            or summed.operands[0].type.symbols & set(body.bound_symbols)):
        return None
    return total, summed
