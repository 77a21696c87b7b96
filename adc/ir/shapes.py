"""Run-time shape constraints: the dimension expressions a call must keep non-negative.

Symbolic shapes are checked once, at the call boundary, so native code never
reads out of bounds. Types fix most of it (every dimension of every value must
be >= 0 — `x[1:]` of `f32[N]` has dimension `N-1`), and static slice bounds add
`N - stop >= 0`: `x[1:3]` of `f32[N]` needs `N >= 3`.

    constraints(func)   # -> (N-1, N-3, ...) for the examples above

A call needs what its callee needs, in the caller's dimensions (`call_needs`): a function's
`contract` is its constraints and its calls' needs. A call whose arguments are static and
break it is the caller's CompileError; passes keep the ops that carry a contract (dce.py).

A loop body or a branch runs only when its parent gets there (`if M > 0: t = x[0]`), so
its constraints cannot be asked of every call: the region function checks them itself
when it runs, and the call fails then. `region_constraints` lists them for the message.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from adc.ir.core import Func, Module, Op
from adc.ir.ops import bind_dims, substitute
from adc.ir.types import Dim, SymDim


def constraints(func: Func) -> tuple[SymDim, ...]:
    """Symbolic dimension expressions that must evaluate >= 0, in a stable order."""
    found = dict.fromkeys(_symbolic(d for p in func.params for d in p.type.shape))
    for op in func.ops:
        found.update(dict.fromkeys(op_constraints(op)))
    return tuple(found)


def op_constraints(op: Op) -> tuple[SymDim, ...]:
    """What `op` needs of the sizes: its results' dimensions, and a slice's bounds within its operand."""
    dims = [d for r in op.results for d in r.type.shape]
    if op.name == "slice":
        for size, lo, hi in zip(op.operands[0].type.shape, op.attrs["start"], op.attrs["stop"]):
            dims += [lo, hi - lo, size - hi]
    return tuple(dict.fromkeys(_symbolic(dims)))


def _symbolic(dims: Iterable[Dim]) -> list[SymDim]:
    return [d for d in dims if isinstance(d, SymDim) and not d.is_symbol]


def region_constraints(module: Module, func: Func) -> tuple[SymDim, ...]:
    """The constraints of the functions `func` runs (loop bodies and branches, theirs too, and so
    on) that its own dimension symbols decide and its own constraints do not already hold."""
    known, own = set(func.dim_symbols), set(constraints(func))
    found: dict[SymDim, None] = {}
    for region in module.reachable(func.name):
        if region is not func:
            found.update((c, None) for c in constraints(region) if c not in own and c.symbols <= known)
    return tuple(found)


def contract(name: str, funcs: Mapping[str, Func], known: dict[str, tuple[SymDim, ...]]) -> tuple[SymDim, ...]:
    """What a call of `funcs[name]` needs of its sizes: its constraints and its calls' needs, in
    its own dimension symbols. Kept in `known` (its callees' too), computed callees first without
    recursion: a chain of calls is as long as the program."""
    stack, entered = [name], set()
    while stack:
        top = stack[-1]
        if top in known:
            stack.pop()
            continue
        missing = [c for c in _callees(funcs[top]) if c in funcs and c not in known and c not in entered]
        entered.add(top)
        if missing:
            stack += missing
            continue
        stack.pop()
        found = dict.fromkeys(constraints(funcs[top]))
        for op in funcs[top].ops:
            if op.name == "call" and op.attrs["callee"] in known:
                found.update(dict.fromkeys(d for d in call_needs(op, funcs, known) if isinstance(d, SymDim)))
        known[top] = tuple(found)
    return known[name]


def call_needs(op: Op, funcs: Mapping[str, Func], known: dict[str, tuple[SymDim, ...]]) -> tuple[Dim, ...]:
    """The callee's contract at call `op`, in the caller's dimensions: an int where they are static."""
    return tuple(value for _, value in needs_at(funcs[op.attrs["callee"]], [v.type for v in op.operands], funcs, known))


def needs_at(callee: Func, arg_types, funcs: Mapping[str, Func],
             known: dict[str, tuple[SymDim, ...]]) -> list[tuple[SymDim, Dim]]:
    """Each need of `callee`'s contract with its value for arguments of `arg_types`."""
    env = bind_dims(callee.param_types, arg_types)
    return [(c, substitute(c, env)) for c in contract(callee.name, funcs, known) if c.symbols <= env.keys()]


def _callees(func: Func) -> list[str]:
    return [op.attrs["callee"] for op in func.ops if op.name == "call"]
