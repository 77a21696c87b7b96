"""Dead code elimination: drop ops none of whose results is used.

Runs last in the default pipeline, after simplify and cse have orphaned ops.
Every op of the IR is pure, so an op is live exactly when one of its results
reaches a `return` through live ops; one backward sweep finds them all. A dead
loop or `if` takes its region functions with it: never called alone, they would
otherwise be left as functions of symbols nothing binds. A scan whose results are
dead stays when a live op's type still names its length: it binds that dimension.
A dead slice stays when its bounds need of the sizes what nothing live does (`x[1]` needs
N >= 2), and so does a dead call whose callee needs such a thing (ir/shapes.py `contract`):
a function's contract is what its source says, whether or not a result reads it, and is
checked as the interpreter and a call from Python check it. Read by nothing, a slice costs
no code, only that check (an inlined call, its callee's ops that carry the contract).

    %0 = exp %x : f32[N]                           %0 = mul %x, %x : f32[N]
    %1 = mul %x, %x : f32[N]          ==>          return %0
    return %1
"""
from __future__ import annotations

from collections.abc import Mapping

from adc.ir.core import REGION_ATTRS, Func, Module, Op, Value, dims_in
from adc.ir.shapes import call_needs, constraints, op_constraints
from adc.ir.types import SymDim, evaluate_dim


def eliminate_dead_code(module: Module) -> Module:
    known: dict[str, tuple[SymDim, ...]] = {}       # the functions' contracts, found once for the module
    return without_orphan_regions(module, {f.name: eliminate_dead_code_func(f, module.funcs, known) for f in module})


def without_orphan_regions(before: Module, funcs: dict[str, Func]) -> Module:
    """The module of `funcs` less the functions that were regions in `before` (bodies, branches),
    or that the pass made (every function a pass adds is a region), and that nothing left runs any
    more: no control-flow op, and no call (the reversal of a loop calls its body's VJP, which may
    also have been a region). A region left behind would be taken for a kernel, which must define
    every dimension its ops use: a pruned copy superseded in the pass, reading its parent's."""
    regions = {name for func in before for name in func.regions()} | (funcs.keys() - before.funcs.keys())
    while True:
        run = {name for func in funcs.values() for name in func.references()}
        orphans = [name for name in funcs if name in regions and name not in run]
        if not orphans:
            return Module(funcs, before.name)
        funcs = {name: func for name, func in funcs.items() if name not in orphans}


def eliminate_dead_code_func(func: Func, funcs: Mapping[str, Func] | None = None,
                             known: dict[str, tuple[SymDim, ...]] | None = None) -> Func:
    """`func` less its dead ops; with `funcs`, the dimensions its live loops' regions read from it
    keep the scans that bind them, as the live ops' own types do, and the dead calls whose callees
    need what nothing else checks stay, as dead slices do (see the module docstring)."""
    checks: set[Op] = set()
    known = {} if known is None else known
    kept = _live_ops(func, funcs, checks)
    if len(kept) == len(func.ops):      # the usual case: nothing dead, nothing more to look at
        return func
    defined = set(func.params)      # a check reads only these (prune_loops drops a body's unread params)
    for op in func.ops:
        if defined.issuperset(op.operands):
            defined.update(op.results)
    while True:
        held = set(constraints(Func(func.name, func.params, tuple(kept), func.returns, func.loc)))
        held.update(*(_needs(op, funcs, known) for op in kept if op.name == "call"))
        alive, more = set(kept), False
        for op in func.ops:     # in order, each check kept only if those before do not imply it
            if op.name in ("slice", "call") and op not in alive and defined.issuperset(op.operands):
                needs = _needs(op, funcs, known)
                if not all(_implied(need, held) for need in needs):
                    checks.add(op)
                    held.update(needs)
                    more = True
        if not more:
            return Func(func.name, func.params, tuple(kept), func.returns, func.loc)
        kept = _live_ops(func, funcs, checks)


def _implied(need: SymDim, held: set[SymDim]) -> bool:
    """need >= 0 follows from a held h >= 0 that it exceeds by a constant (N-1 from N-6)."""
    if need in held:
        return True
    for h in held:
        diff = need - h
        if isinstance(diff, int) or not diff.symbols:
            if evaluate_dim(diff, {}) >= 0:
                return True
    return False


def _needs(op: Op, funcs: Mapping[str, Func] | None, known: dict[str, tuple[SymDim, ...]]) -> tuple[SymDim, ...]:
    """What a slice needs of the sizes (its bounds), or a call (its callee's contract, where
    `funcs` holds the callee), that the function must check even when no result is read."""
    if op.name == "slice":
        return op_constraints(op)
    if funcs is None or op.attrs["callee"] not in funcs:
        return ()
    return tuple(d for d in call_needs(op, funcs, known) if isinstance(d, SymDim))


def _live_ops(func: Func, funcs: Mapping[str, Func] | None, checks: set[Op]) -> list[Op]:
    """The ops of `func` that reach its returns, with the slices in `checks` and what they read."""
    live: set[Value] = set(func.returns)
    binds = any(op.name == "scan" for op in func.ops)      # else no symbol can keep an op
    symbols = set().union(*(v.type.symbols for v in func.returns)) if binds else set()
    module = Module(funcs) if funcs is not None and binds else None
    memo: dict[str, tuple[str, ...]] = {}
    kept = []
    for op in reversed(func.ops):
        if (any(r in live for r in op.results) or op in checks
                or (op.name == "scan" and op.attrs["length"] in symbols)):
            kept.append(op)
            live.update(op.operands)
            if binds:
                symbols.update(*(v.type.symbols for v in op.results), *(d.symbols for d in dims_in(op.attrs.values())))
            if module is not None:
                regions = (str(op.attrs[key]) for key in REGION_ATTRS.get(op.name, ()))
                symbols.update(*(module.region_symbols(name, memo) for name in regions if name in module.funcs))
    return kept[::-1]
