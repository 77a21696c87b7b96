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

from adc.ir.core import Func, Module
from adc.ir.types import Dim, SymDim


def constraints(func: Func) -> tuple[SymDim, ...]:
    """Symbolic dimension expressions that must evaluate >= 0, in a stable order."""
    found: dict[SymDim, None] = {}

    def need(d: Dim) -> None:
        if isinstance(d, SymDim) and not d.is_symbol:
            found.setdefault(d, None)

    values = list(func.params) + [r for op in func.ops for r in op.results]
    for v in values:
        for d in v.type.shape:
            need(d)
    for op in func.ops:
        if op.name == "slice":
            for size, lo, hi in zip(op.operands[0].type.shape, op.attrs["start"], op.attrs["stop"]):
                need(lo)
                need(hi - lo)
                need(size - hi)
    return tuple(found)


def region_constraints(module: Module, func: Func) -> tuple[SymDim, ...]:
    """The constraints of the loop bodies and branches `func` runs (theirs too, and so on) that
    its own dimension symbols decide and its own constraints do not already hold."""
    known, own = set(func.dim_symbols), set(constraints(func))
    found: dict[SymDim, None] = {}
    pending, seen = list(func.regions()), set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        region = module[name]
        pending.extend(region.regions())
        found.update((c, None) for c in constraints(region) if c not in own and c.symbols <= known)
    return tuple(found)
