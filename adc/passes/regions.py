"""What the control-flow rows of the pass tables share. A pass transforms a `for`, `while` or `if`
by transforming its region functions with itself (the JVP of a loop runs the JVP of its body);
the new regions go into the pass's own copy of the module's functions under fresh names, and the
new op replaces the primal one in place, keeping its result values as its first results, so the
ops after it need no renaming.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Mapping, Sequence, TypeVar
from weakref import WeakKeyDictionary

from adc.errors import Location
from adc.ir.builder import Builder
from adc.ir.core import REGION_ATTRS, Attrs, Func, FuncRef, Module, Op, Value
from adc.ir.ops import infer_types
from adc.ir.types import TensorType
from adc.passes.inline import inline_func

T = TypeVar("T")

# region function -> what was derived from it, by key (derived_once)
_DERIVED: WeakKeyDictionary[Func, dict[Hashable, Any]] = WeakKeyDictionary()


def fresh_name(funcs: Mapping[str, Func], base: str) -> str:
    """`base`, or `base` with the first numeric suffix no function has."""
    candidate, n = base, 1
    while candidate in funcs:
        candidate, n = f"{base}{n}", n + 1
    return candidate


def derived_once(funcs: dict[str, Func], source: Func, key: Hashable, made: Callable[[T], Sequence[Func]],
                 build: Callable[[], T]) -> T:
    """What `build()` derives from region function `source` (its VJP, its split VJP, a pruned copy,
    what its results read) for `key`, built once per function. A region runs in several places once
    a loop is reversed (its body is differentiated twice: stored steps and segments,
    adjoint_control_flow.py), so without this the work on a nest of loops, and its code, would
    grow twice over or more per level. A result is reused while `funcs` (or a copy of it) holds
    the functions it `made`, which it added after the regions they call."""
    memo = _DERIVED.setdefault(source, {})
    if key in memo and all(funcs.get(f.name) is f for f in made(memo[key])):
        return memo[key]
    memo[key] = result = build()
    return result


def symbols_within(funcs: Mapping[str, Func], func: Func) -> set[str]:
    """Every dimension symbol `func` and the regions it reaches use or bind (their scans' lengths
    too, and those of the functions they call, which inlining brings into them): what a new symbol
    of `func` (a batch axis) must differ from, as its regions share its symbols."""
    found: set[str] = set()
    for f in (func, *reached(funcs, func)):
        found.update(f.dim_symbols, f.free_symbols, f.bound_symbols)
    return found


def reached(funcs: Mapping[str, Func], func: Func) -> list[Func]:
    """The functions of `funcs` that `func`'s regions and calls reach, transitively."""
    found: list[Func] = []
    stack, seen = [func], set()
    while stack:
        f = stack.pop()
        for op in f.ops:
            for key in (*REGION_ATTRS.get(op.name, ()), *(("callee",) if op.name == "call" else ())):
                if op.attrs[key] not in seen and op.attrs[key] in funcs:
                    seen.add(op.attrs[key])
                    found.append(funcs[op.attrs[key]])
                    stack.append(found[-1])
    return found


def call_free(funcs: dict[str, Func], name: str) -> Func:
    """Region function `name` with its calls inlined (region copies added to `funcs`): what a pass
    transforms."""
    return inline_func(funcs[name], Module(dict(funcs)), funcs)


def add_region(funcs: dict[str, Func], base: str, params: Sequence[Value], like: Func,
               returns: Sequence[Value] | None = None) -> Func:
    """`like`'s body with the parameters `params` (reordered, or with unused ones added) and its
    returned values reordered as `returns`, added to `funcs` under a fresh name made from `base`."""
    returns = like.returns if returns is None else tuple(returns)
    func = Func(fresh_name(funcs, base), tuple(params), like.ops, returns, like.loc)
    funcs[func.name] = func
    return func


def build_region(funcs: dict[str, Func], base: str, params: Sequence[Value],
                 build: Callable[[Builder], Sequence[Value]], loc: Location | None) -> FuncRef:
    """A new region function of `params` returning what `build` emits into its builder, added to
    `funcs` under a fresh name made from `base`."""
    inner = Builder(funcs, loc)
    inner.params = list(params)
    returns = build(inner)
    func = inner.finish(fresh_name(funcs, base), returns, loc)
    funcs[func.name] = func
    return FuncRef(func.name)


def like(values: Sequence[Value], names: Sequence[str] | None = None) -> list[Value]:
    """New parameters of the types (and names) of `values`."""
    return [Value(v.type, n) for v, n in zip(values, names or [v.name for v in values])]


def unused_params(types: Sequence[TensorType]) -> list[Value]:
    return [Value(t, f"unused{k}") for k, t in enumerate(types)]


def extend(b: Builder, op: Op, operands: Sequence[Value], attrs: Mapping[str, Any],
           own: Sequence[int] | None = None, name: str | None = None) -> tuple[Value, ...]:
    """Replace `op` by op `name` (default op's) over `operands` with `attrs`, whose results at
    positions `own` (default: the first) are op's own values, at the end of `b` (after the ops
    making its new operands: no op of `b` may use op's results yet); returns its other results."""
    name = name or op.name
    types = infer_types(name, [v.type for v in operands], Attrs(attrs), b.funcs)
    own = range(len(op.results)) if own is None else own
    results = [Value(t) for t in types]
    for position, value in zip(own, op.results, strict=True):
        results[position] = value
    if op in b.ops:
        b.ops.remove(op)
    b.ops.append(Op(name, tuple(operands), Attrs(attrs), tuple(results), op.loc))
    return tuple(v for k, v in enumerate(results) if k not in set(own))
