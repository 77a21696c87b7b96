"""The sparsity rules of calls and control flow: they walk their callees and regions with the
analysis itself (`ctx.run`, the interpreter's walk with the analysis's semantics).

A loop whose trip count is known (an integer input or constant) runs its body that many times
on the states, each iteration with its index known (so `y[i] = f(x[i])` keeps its diagonal), up
to UNROLLED_TRIPS iterations; past that, every iteration at once (iterations.py: the index a
vector of all its values); where that walk cannot follow the body, or when the count (a `while`
condition) depends on floats, the carried states are a fixed point: they start as the initial values' and take the
join with what the body makes of them until nothing changes (patterns only grow, known values
only become unknown, so this ends). A branch whose condition is known is the branch taken;
otherwise both, joined.

    for i in range(N): acc = acc + x[i]      N known: N walks of the body, each gather exact
    while norm(r) > tol: r = A @ r           the fixed point of r's pattern
"""
from __future__ import annotations

import numpy as np

from adc.ir.interp import call_eval
from adc.passes.sparsity.array_rules import result
from adc.passes.sparsity.dependence import Dependence, columns_of, join, stacked
from adc.passes.sparsity.iterations import NotIterable, iterated_loop, per_iteration_rows
from adc.passes.sparsity.patterns import Pattern, union

UNROLLED_TRIPS = 1024       # known trip counts up to this are walked iteration by iteration
sparsity_rules: dict = {}


def call_sparsity(op, states, ctx):
    # the callee walked on the states, its symbols bound to their shapes (the interpreter's rule)
    return (yield from call_eval(states, op.attrs, ctx))


def custom_gradient_sparsity(op, states, ctx):
    # What differentiation sees is the backward: the results the gradient covers depend on input
    # i where the backward's cotangent of input i depends on the result's cotangent (transposed).
    forward = yield ctx.run(ctx.module[op.attrs["forward"]], states, ctx.dims)
    k, backward = op.attrs["results"], ctx.module[op.attrs["backward"]]
    primals = [Dependence(s.shape, None, s.value) for s in states]
    saved = [Dependence(r.shape, None, r.value) for r in forward[k:]]
    covered = []
    for j in range(k):
        seeded = [Dependence(r.shape, Pattern.identity(r.size) if i == j else None) for i, r in enumerate(forward[:k])]
        cts = yield ctx.run(backward, (*primals, *saved, *seeded), ctx.dims)
        parts = [s.pattern.combine(ct.pattern.transpose()) for s, ct in zip(states, cts)
                 if s.pattern is not None and ct.pattern is not None]
        covered.append(result(op, ctx, union(parts), j))
    return (*covered, *forward[k:])


sparsity_rules.update(call=call_sparsity, custom_gradient=custom_gradient_sparsity)


def _trips(count: Dependence) -> int | None:
    """A known trip count small enough to walk iteration by iteration, else None."""
    if count.value is None or int(count.value) > UNROLLED_TRIPS:
        return None
    return max(int(count.value), 0)


def _fixed_point(ctx, body, leading, carried, captured):
    """The carried states joined with what the body makes of them until nothing changes, and the
    body's other results at that point (the generator's return value)."""
    carried = list(carried)
    while True:
        out = yield ctx.run(body, (*leading, *carried, *captured), ctx.dims)
        joined = [join(c, o) for c, o in zip(carried, out)]
        if all(a.same_as(b) for a, b in zip(joined, carried)):
            return joined, out[len(carried):]
        carried = joined


def _index(i: int | None) -> Dependence:
    return Dependence((), None, None if i is None else np.asarray(i, np.int64))


def _long_loop(ctx, body, count: Dependence, carried, captured):
    """A loop of more than UNROLLED_TRIPS known trips walked once for every iteration
    (iterations.py); else, or where that walk cannot follow the body, the fixed point over an
    unknown index (each iteration's other results then the fixed point's)."""
    if count.value is not None:
        try:
            return (yield from iterated_loop(ctx, body, int(count.value), carried, captured))
        except NotIterable:
            pass
    carried, rows = yield from _fixed_point(ctx, body, [_index(None)], carried, captured)
    return carried, rows


def for_sparsity(op, states, ctx):
    body, k = ctx.module[op.attrs["body"]], op.attrs["carried"]
    count, carried, captured = states[0], states[1:1 + k], states[1 + k:]
    trips = _trips(count)
    if trips is None:
        carried, _ = yield from _long_loop(ctx, body, count, carried, captured)
        return tuple(carried)
    for i in range(trips):
        carried = yield ctx.run(body, (_index(i), *carried, *captured), ctx.dims)
    return tuple(carried)


def scan_sparsity(op, states, ctx):
    # a `for` that also stacks each iteration's rows along `axis` (its length symbol bound here)
    body, k, axis = ctx.module[op.attrs["body"]], op.attrs["carried"], op.attrs["axis"]
    count, carried, captured = states[0], states[1:1 + k], states[1 + k:]
    if count.value is None:
        raise ValueError(f"sparsity: the trip count of scan @{op.attrs['body']} is not known")
    ctx.dims[op.attrs["length"]] = length = max(int(count.value), 0)
    trips = _trips(count)
    outs = [result(op, ctx, None, k + j) for j in range(len(op.results) - k)]
    if trips is None:       # each row block its iteration's (or the fixed point's, which covers each)
        carried, rows = yield from _long_loop(ctx, body, count, carried, captured)
        columns = columns_of(rows)
        blocks = [per_iteration_rows(r, length, columns) if columns else None for r in rows]
    else:
        per_iteration = []
        for i in range(trips):
            out = yield ctx.run(body, (_index(i), *carried, *captured), ctx.dims)
            carried, _ = out[:k], per_iteration.append(out[k:])
        columns = columns_of([r for iteration in per_iteration for r in iteration])
        blocks = [stacked([iteration[j] for iteration in per_iteration], columns) if columns else None
                  for j in range(len(outs))]
    return (*carried, *(_stack(b, out, axis) for b, out in zip(blocks, outs)))


def _stack(rows: Pattern | None, out: Dependence, axis: int) -> Dependence:
    """The iterations' rows (a block of each one's, of out's shape without `axis`) stacked along
    `axis`: out's element (.., i, ..) is block i's element (.., ..)."""
    if rows is None:
        return out
    length = out.shape[axis]
    source = np.moveaxis(np.arange(out.size, dtype=np.int64).reshape((length,) + out.shape[:axis] + out.shape[axis + 1:]),
                         0, axis).ravel()
    return Dependence(out.shape, rows.take(source))


def while_sparsity(op, states, ctx):
    cond, body, k = ctx.module[op.attrs["cond"]], ctx.module[op.attrs["body"]], op.attrs["carried"]
    carried, captured = tuple(states[:k]), tuple(states[k:])
    for _ in range(UNROLLED_TRIPS):
        (go,) = yield ctx.run(cond, (*carried, *captured), ctx.dims)
        if go.value is None:
            break
        if not bool(go.value):
            return carried
        carried = yield ctx.run(body, (*carried, *captured), ctx.dims)
    carried, _ = yield from _fixed_point(ctx, body, [], carried, captured)
    return tuple(carried)


def if_sparsity(op, states, ctx):
    # a known condition takes its branch; otherwise either may be taken: the join of both
    cond, operands = states[0], states[1:]
    if cond.value is not None:
        branch = op.attrs["then_branch"] if bool(cond.value) else op.attrs["else_branch"]
        return (yield ctx.run(ctx.module[branch], operands, ctx.dims))
    then = yield ctx.run(ctx.module[op.attrs["then_branch"]], operands, ctx.dims)
    other = yield ctx.run(ctx.module[op.attrs["else_branch"]], operands, ctx.dims)
    return tuple(join(a, b) for a, b in zip(then, other))


sparsity_rules.update({"for": for_sparsity, "scan": scan_sparsity, "while": while_sparsity, "if": if_sparsity})
