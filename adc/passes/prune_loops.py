"""Dead carried values: a loop keeps only the carried values something needs.

Dead code elimination drops an op none of whose results is used, but a loop whose results are
used in part still computes all its carried values, each iteration. This pass drops a carried
value (and a scan's stacked row) whose result is unused and that no kept one, nor a while's
condition, depends on through the body; then the captured values the kept ones no longer read.
The body loses the matching parameters and results, under a new name. The adjoint of a loop
computes the cotangents of every float value it reads, which makes such values: a gradient
w.r.t. the weights of an RNN need not accumulate the one w.r.t. its inputs.

    %0, %1 = for %n, %h, %acc, %w {body = @step, carried = 2, ...}     (%1 unused, %h does not read %acc)
      ==>  %0 = for %n, %h, %w {body = @step_pruned, carried = 1, ...}
"""
from __future__ import annotations

from adc.ir.core import Attrs, Func, FuncRef, Module, Op, Value, dims_in
from adc.ir.ops import OPS
from adc.passes.dce import eliminate_dead_code_func, without_orphan_regions
from adc.passes.regions import derived_once, fresh_name, reached



def prune_dead_loop_values(module: Module) -> Module:
    """Every loop of `module` pruned; bodies no loop runs any more go. The module pass: a
    derivative's own cleanup prunes as it goes, but what later passes leave unread (values the
    cleanup no longer needs, a row a hoisted op replaced) is dropped only here."""
    funcs = dict(module.funcs)
    for name in list(funcs):
        funcs[name] = prune_loops(funcs[name], funcs)
    return without_orphan_regions(module, funcs)


def prune_loops(func: Func, funcs: dict[str, Func]) -> Func:
    """`func` with its loops' dead carried values dropped (new bodies added to `funcs`)."""
    used = set(func.returns)
    kept: list[Op] = []
    for op in reversed(func.ops):
        if OPS[op.name].body_leads is not None and any(r in used for r in op.results):
            op = _pruned(op, used, funcs)
        kept.append(op)
        used.update(op.operands)
    if all(a is b for a, b in zip(reversed(kept), func.ops)):
        return func
    return Func(func.name, func.params, tuple(reversed(kept)), func.returns, func.loc)


def _pruned(op: Op, used: set[Value], funcs: dict[str, Func]) -> Op:
    lead, k = OPS[op.name].body_leads, op.attrs["carried"]
    body = funcs[op.attrs["body"]]
    wanted = [j for j, r in enumerate(op.results) if r in used]       # carried values, then stacked rows
    live = {j for j in wanted if j < k}
    cond_reads = _reads(funcs[op.attrs["cond"]], [0]) if op.name == "while" else set()
    while True:         # a kept carried value needs the carried values its update reads
        needed = cond_reads | _reads(body, sorted(live) + [j for j in wanted if j >= k], funcs)
        grown = live | {p - lead for p in needed if lead <= p < lead + k}
        if grown == live:
            break
        live = grown
    captured = [p for p in range(lead + k, len(body.params)) if p in needed]
    carried = sorted(live)
    rows = [j for j in wanted if j >= k]
    if len(carried) == k and len(captured) == len(body.params) - lead - k and len(rows) == len(op.results) - k:
        return op
    params = list(range(lead)) + [lead + j for j in carried] + captured
    attrs = dict(op.attrs, carried=len(carried), body=_region(funcs, body.name, params, carried + rows))
    if op.name == "while":
        cond = funcs[op.attrs["cond"]]
        attrs["cond"] = _region(funcs, cond.name, params, list(range(len(cond.returns))))
    operands = tuple(op.operands[p] for p in params)       # a body's parameters match the operands
    return Op(op.name, operands, Attrs(attrs), tuple(op.results[j] for j in carried + rows), op.loc)


def _region(funcs: dict[str, Func], name: str, params: list[int], results: list[int]) -> FuncRef:
    """Region `name` keeping only its `params` and `results` (by position), pruned in turn: one
    copy however many loops run it so (regions.derived_once)."""
    def build() -> Func:
        region = funcs[name]
        trimmed = Func(fresh_name(funcs, f"{name}_pruned"), tuple(region.params[p] for p in params), region.ops,
                       tuple(region.returns[j] for j in results), region.loc)
        pruned = eliminate_dead_code_func(prune_loops(eliminate_dead_code_func(trimmed, funcs), funcs), funcs)
        funcs[pruned.name] = pruned
        return pruned

    key = ("pruned", tuple(params), tuple(results))
    return FuncRef(derived_once(funcs, funcs[name], key, lambda pruned: (pruned,), build).name)


def _reads(func: Func, results: list[int], funcs: dict[str, Func] | None = None) -> set[int]:
    """The indices of the parameters `func`'s `results` are computed from; with `funcs`, after the
    loops inside it are pruned to what those results need (a loop's result reads all its operands),
    once per function and results while the functions it reaches are those it reached then
    (regions.derived_once)."""
    if funcs is None:
        return _reads_of(func, results)

    def build() -> tuple[set[int], list[Func]]:
        pruned = prune_loops(Func(func.name, func.params, func.ops, tuple(func.returns[j] for j in results),
                                  func.loc), funcs)
        return _reads_of(pruned, list(range(len(pruned.returns)))), reached(funcs, func)

    return derived_once(funcs, func, ("reads", tuple(results)), lambda found: found[1], build)[0]


def _reads_of(func: Func, results: list[int]) -> set[int]:
    reads: dict[Value, set[int]] = {p: {k} for k, p in enumerate(func.params)}
    binders: dict[str, set[int]] = {}       # a scan's length symbol reads what the scan reads
    for op in func.ops:
        bound = (binders.get(s, ()) for s in _symbols(op)) if binders else ()
        sources = set().union(*(reads[v] for v in op.operands), *bound)
        for r in op.results:
            reads[r] = sources
        if op.name == "scan":
            binders[op.attrs["length"]] = sources
    return set().union(*(reads[func.returns[j]] for j in results)) if results else set()


def _symbols(op: Op) -> set[str]:
    """The dimension symbols `op`'s results and attributes name."""
    return set().union(*(r.type.symbols for r in op.results), *(d.symbols for d in dims_in(op.attrs.values())))
