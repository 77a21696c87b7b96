"""Run-time shape constraints: the dimension expressions a call must keep non-negative.

Symbolic shapes are checked once, at the call boundary, so native code never
reads out of bounds. Types fix most of it (every dimension of every value must
be >= 0 — `x[1:]` of `f32[N]` has dimension `N-1`), and static slice bounds add
`N - stop >= 0`: `x[1:3]` of `f32[N]` needs `N >= 3`.

    constraints(func)   # -> (N-1, N-3, ...) for the examples above

A loop body or a branch runs only when its parent gets there (`if M > 0: t = x[0]`), so
its constraints cannot be asked of every call: the region function checks them itself
when it runs, and the call fails then. `region_constraints` lists them for the message.
"""
from __future__ import annotations

from typing import Iterable

from adc.ir.core import Func, Module, Op
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
