"""Loop-invariant code motion: what a loop body computes from its captured values alone is computed
once, before the loop.

An op of a `for`, `scan` or `while` body whose operands are all captured values (the body's
parameters after the carried ones), constants or results of such ops gives the same result at
every iteration. The pass copies those ops into the function running the loop, just before it,
and passes the results the body still needs as new captured values, to a new body (and, for a
`while`, a condition taking them too, unused). The reverse of the loop then also differentiates
them once, not once per iteration.

Ops free once fused into their consumers (constants, dims, iotas, broadcasts, reshapes,
transposes) are copied to feed the moved ops and kept in the body too: passed in, their results
would be buffers. Calls
and control flow stay, as does an op whose shape uses a symbol the body binds (a scan's length).

    %0 = for %n, %x, %d {body = @step}            @step(%i, %x, %d): %m = neg %d; %y = mul %x, %m
      ==>  %m = neg %d
           %0 = for %n, %x, %d, %m {body = @step_hoisted}     @step_hoisted(%i, %x, %d, %m): %y = mul %x, %m
"""
from __future__ import annotations

from adc.ir.core import Attrs, Func, FuncRef, Module, Op, Value
from adc.ir.ops import OPS, with_trait
from adc.ir.shapes import constraints, op_constraints
from adc.passes.cse import cse_func
from adc.passes.dce import eliminate_dead_code_func, without_orphan_regions
from adc.passes.regions import fresh_name, unused_params

FREE = with_trait("cheap")
STAYS = with_trait("control_flow") | {"call"}


def hoist_invariants(module: Module) -> Module:
    """Every loop of `module` with its invariant ops moved out; bodies no loop runs any more go."""
    funcs = dict(module.funcs)
    made: dict = {}
    for name in list(funcs):
        funcs[name] = hoist_func(funcs[name], funcs, made)
    return without_orphan_regions(module, funcs)


def hoist_func(func: Func, funcs: dict[str, Func], made: dict | None = None) -> Func:
    """`func` with the invariant ops of its loops before them (new bodies added to `funcs`; `made`
    remembers them, so loops running one body — copies an inliner made — share the new one). The
    copies merge (cse): a loop's own invariants include those its inner loops gave it, so in a nest
    whose loops run shared bodies (a reversed loop's two reversals) they would multiply per level."""
    ops: list[Op] = []
    held = set(constraints(func))
    for op in func.ops:
        if OPS[op.name].body_leads is not None:
            moved, op = _hoisted(op, funcs, {} if made is None else made, held)
            ops += moved
        ops.append(op)
    if len(ops) == len(func.ops):
        return func
    return cse_func(Func(func.name, func.params, tuple(ops), func.returns, func.loc))


def _hoisted(loop: Op, funcs: dict[str, Func], made: dict, held: set) -> tuple[list[Op], Op]:
    """(the ops moved before `loop`, the loop running its new body), or ([], loop). An op needing
    sizes its new function does not already need (`held`) stays: moved, it would ask them of
    calls that never run the loop (x[5] in the body of a loop of no iterations)."""
    lead, k = OPS[loop.name].body_leads, loop.attrs["carried"]
    body = funcs[loop.attrs["body"]]
    outside: dict[Value, Value] = dict(zip(body.params[lead + k:], loop.operands[lead + k:]))
    copies: dict[Value, Op] = {}        # a body value -> the op computing it outside
    copied: list[Op] = []               # those ops, in the body's order
    staying: list[Op] = []
    bound = set(body.bound_symbols)
    for op in body.ops:
        if (op.name in STAYS or not all(v in outside for v in op.operands) or _uses(op, bound)
                or not held.issuperset(op_constraints(op))):
            staying.append(op)
            continue
        results = tuple(Value(r.type, r.name) for r in op.results)
        copied.append(Op(op.name, tuple(outside[v] for v in op.operands), op.attrs, results, op.loc))
        for old, new in zip(op.results, results):
            outside[old], copies[old] = new, copied[-1]
        if op.name in FREE:         # copied for the moved ops it feeds, and kept for the body's
            staying.append(op)
    read_inside = _read_by_live(staying, body.returns)
    passed = [v for v in copies if copies[v].name not in FREE and v in read_inside]
    if not passed:
        return [], loop
    moved = _needed([outside[v] for v in passed], copied)
    key = (loop.attrs["body"], loop.attrs.get("cond"), tuple(map(id, passed)))
    if key not in made:
        made[key] = _regions(loop, body, passed, funcs)
    attrs = dict(loop.attrs, **made[key])
    operands = loop.operands + tuple(outside[v] for v in passed)
    return moved, Op(loop.name, operands, Attrs(attrs), loop.results, loop.loc)


def _regions(loop: Op, body: Func, passed: list[Value], funcs: dict[str, Func]) -> dict[str, FuncRef]:
    """The new body reading `passed` from new parameters (and a `while`'s condition taking them,
    unused), added to `funcs`."""
    params = [Value(v.type, f"hoisted{j}") for j, v in enumerate(passed)]
    renamed = dict(zip(passed, params))
    new_body = eliminate_dead_code_func(Func(
        fresh_name(funcs, f"{body.name}_hoisted"), body.params + tuple(params),
        tuple(Op(op.name, tuple(renamed.get(v, v) for v in op.operands), op.attrs, op.results, op.loc)
              for op in body.ops),
        tuple(renamed.get(v, v) for v in body.returns), body.loc), funcs)
    funcs[new_body.name] = new_body
    regions = {"body": FuncRef(new_body.name)}
    if loop.name == "while":
        cond = funcs[loop.attrs["cond"]]
        widened = Func(fresh_name(funcs, f"{cond.name}_hoisted"),
                       cond.params + tuple(unused_params([p.type for p in params])), cond.ops, cond.returns, cond.loc)
        funcs[widened.name] = widened
        regions["cond"] = FuncRef(widened.name)
    return regions


def _uses(op: Op, symbols: set[str]) -> bool:
    """Whether `op`'s results, or the size a `dim` op computes, use one of `symbols`."""
    if not symbols:
        return False
    used = {s for r in op.results for s in r.type.symbols}
    if op.name == "dim":
        used |= set(getattr(op.attrs["value"], "symbols", ()))
    return bool(used & symbols)


def _read_by_live(ops: list[Op], returns: tuple[Value, ...]) -> set[Value]:
    """The values that the ops of `ops` still needed for `returns` read, and `returns`: a kept
    copy of a free op whose only reader moved out reads nothing."""
    read = set(returns)
    for op in reversed(ops):
        if read.intersection(op.results):
            read.update(op.operands)
    return read


def _needed(values: list[Value], copied: list[Op]) -> list[Op]:
    """The ops of `copied` that computing `values` takes, in order."""
    wanted = set(values)
    kept = []
    for op in reversed(copied):
        if wanted.intersection(op.results):
            kept.append(op)
            wanted.update(op.operands)
    return kept[::-1]
