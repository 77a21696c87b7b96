"""Long loops walked once for all their iterations: the loop counter is known per iteration, as a
vector, so an index that is a function of it (i, i + 1, i - 1, (i + 1) % N) gives each iteration
its own exact rows, computed with NumPy for every iteration at once.

A value of the body is one of three states: a `Dependence` (dependence.py) when it is the same
in every iteration; `Iterated` when it differs by iteration (its known elements per iteration,
its pattern with a block of rows per iteration); `Written` when it is a shared value with
elements overwritten at per-iteration positions (`y[i] = v` on a carried `y`). The carried
states are shared: the union of what they are over all iterations, grown from their initial
states until the walk adds nothing (usually after one or two walks, however many iterations).
The final states are then exact where the body only overwrites: the initial state with each
position's last writer. Anything else the walk meets with a per-iteration operand (a nested
loop, a reduction of a per-iteration value, a read of an overwritten value) raises `NotIterable`,
and the loop falls back to the fixed point over an unknown index (control_flow.py).

    for i in range(1, N - 1):                          1,500 trips, one walk (two for the fixed point)
        y[i] = x[i - 1] - 2.0 * x[i] + x[i + 1]        row i of y: {i - 1, i, i + 1}
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adc.ir.interp import Context, Semantics, eval_rules, evaluate, walk
from adc.ir.ops import OPS
from adc.passes.sparsity.array_rules import gathered
from adc.passes.sparsity.dependence import Dependence, join, stacked
from adc.passes.sparsity.patterns import Pattern, union

MAX_ROWS = 20_000_000       # per-iteration rows materialized at most; past that the loop's fixed point


class NotIterable(Exception):
    """The body does something with a per-iteration value that this walk does not follow."""


@dataclass(frozen=True, eq=False)
class Iterated:
    """A value that differs by iteration: its shape in one iteration, its known elements
    [trips, *shape] and its pattern: a block of rows per iteration (trips × size rows), each
    joined with the rows `common` to every iteration (size rows; a running sum's, kept once)."""

    shape: tuple[int, ...]
    trips: int
    pattern: Pattern | None = None
    value: np.ndarray | None = None
    common: Pattern | None = None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class Written:
    """A shared value `base` whose flat positions [trips, k] are overwritten per iteration by rows
    (trips × k rows; None: independent of wrt) -- in iteration order, later writes winning."""

    base: Dependence
    positions: np.ndarray
    updates: Pattern | None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.base.shape


def per_iteration_rows(state, trips: int, columns: int) -> Pattern:
    """A state's pattern with a block of rows per iteration (shared rows repeated)."""
    if isinstance(state, Written):
        raise NotIterable("an overwritten value returned per iteration")
    own = state.pattern if isinstance(state, Iterated) else None
    shared = state.common if isinstance(state, Iterated) else state.pattern
    repeated = None if shared is None else shared.take(np.tile(np.arange(state.size, dtype=np.int64), trips))
    return union([own, repeated]) or Pattern.empty(trips * state.size, columns)


def _guard(rows: int) -> None:
    if rows > MAX_ROWS:
        raise NotIterable(f"{rows} per-iteration rows")


def _elementwise(op, states, ctx):
    # f(x, y)[i] reads x[i] and y[i] in each iteration: the union of the per-iteration rows, and
    # of the rows every iteration shares
    shape = ctx.shape(op.results[0].type.shape)
    iterated = [s for s in states if isinstance(s, Iterated)]
    common = union([s.common if isinstance(s, Iterated) else s.pattern for s in states])
    own = union(s.pattern for s in iterated)
    if own is None:
        return (Dependence(shape, common),)
    return (Iterated(shape, iterated[0].trips, own, None, common),)


def _positions(op, index: Iterated, shape: tuple[int, ...], ctx) -> np.ndarray:
    """The flat positions of a value of `shape` that a gather at each iteration's indices reads:
    [trips, elements read per iteration], in the order of the gather's result."""
    axis = op.attrs["axis"]
    _guard(index.value.size * int(np.prod(shape[:axis] + shape[axis + 1:], dtype=np.int64)))
    (read,) = eval_rules["gather"]([np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape), index.value],
                                   op.attrs, ctx)
    return np.moveaxis(np.asarray(read), axis, 0).reshape(index.trips, -1)


def _gather(op, states, ctx):
    # x[idx(i)] of a shared x: row block i is x's rows at the positions iteration i reads
    x, index = states
    if not isinstance(x, Dependence) or not isinstance(index, Iterated) or index.value is None:
        raise NotIterable("a gather of a per-iteration value or at unknown indices")
    shape = ctx.shape(op.results[0].type.shape)
    if x.pattern is None:
        return (Dependence(shape),)
    return (Iterated(shape, index.trips, x.pattern.take(_positions(op, index, x.shape, ctx).ravel())),)


def _scatter(op, states, ctx):
    # base[idx(i)] = v(i): the positions each iteration writes, and v's rows, after base's writes
    base, index, updates = states
    if isinstance(base, Iterated) or not isinstance(index, Iterated) or index.value is None \
            or isinstance(updates, Written):
        raise NotIterable("a scatter into a per-iteration value or at unknown indices")
    shared = base.base if isinstance(base, Written) else base
    positions = _positions(op, index, shared.shape, ctx)
    earlier = base.updates if isinstance(base, Written) else None
    shared_rows = updates.common if isinstance(updates, Iterated) else updates.pattern
    _guard(0 if shared_rows is None else index.trips * shared_rows.nnz)
    columns = next((p.columns for p in (shared.pattern, updates.pattern, shared_rows, earlier) if p is not None), 0)
    rows = per_iteration_rows(updates, index.trips, columns) if columns else None
    if isinstance(base, Written):
        rows = _interleave(base, rows, index.trips, columns)
        positions = np.concatenate([base.positions, positions], axis=1)
    return (Written(shared, positions, rows),)


def _interleave(first: Written, rows: Pattern | None, trips: int, columns: int) -> Pattern | None:
    """The rows of two writes in one body, iteration by iteration: `first`'s, then `rows`."""
    if rows is None:
        return None
    a = first.updates or Pattern.empty(first.positions.size, columns)
    per_a, per_b = a.rows // trips, rows.rows // trips
    steps = np.arange(trips, dtype=np.int64)[:, None]
    source = np.hstack([steps * per_a + np.arange(per_a), a.rows + steps * per_b + np.arange(per_b)])
    return stacked([Dependence((a.rows,), a), Dependence((rows.rows,), rows)], columns).take(source.ravel())


iterated_rules = {"gather": _gather, "scatter": _scatter}


def _apply(shared: Semantics):
    def apply(op, states, ctx):
        plain = Context(ctx.dims, ctx.module, shared)
        if all(isinstance(s, Dependence) for s in states):
            return shared.apply(op, states, plain)
        opdef = OPS[op.name]
        if opdef.regions or opdef.has("calls"):
            raise NotIterable(f"'{op.name}' of a per-iteration value")
        if op.name in iterated_rules:
            return iterated_rules[op.name](op, states, ctx)
        if any(isinstance(s, Written) for s in states):
            raise NotIterable(f"'{op.name}' reads an overwritten value")
        if not opdef.has("elementwise"):
            raise NotIterable(f"'{op.name}' of a per-iteration value")
        if all(s.value is not None for s in states):      # integers known per iteration: one NumPy call
            (out,) = evaluate(op, [s.value for s in states], plain)
            trips = next(s.trips for s in states if isinstance(s, Iterated))
            return (Iterated(ctx.shape(op.results[0].type.shape), trips, None, np.asarray(out)),)
        if opdef.has("non_differentiable") or all(s.pattern is None for s in states):
            return (Dependence(ctx.shape(op.results[0].type.shape)),)
        return _elementwise(op, states, ctx)
    return apply


def _keep(shared: Semantics):
    def keep(name, value, state, ctx):
        if isinstance(state, Dependence):
            return shared.keep(name, value, state, ctx)
        if isinstance(state, Written):
            return state if value.type.dtype.is_float else Dependence(state.shape)
        known = None if state.value is None else state.value.astype(value.type.dtype.numpy, copy=False)
        floats = value.type.dtype.is_float and state.pattern is not None and state.pattern.nnz
        return Iterated(state.shape, state.trips, state.pattern if floats else None, known,
                        state.common if floats else None)
    return keep


def iterated_semantics(shared: Semantics) -> Semantics:
    """The walk over every iteration at once, falling back on `shared` (the analysis's own
    semantics) for ops whose operands are the same in every iteration."""
    return Semantics(_apply(shared), shared.bind, _keep(shared))


def everything(state) -> Dependence:
    """A shared state covering the body's result in every iteration: the union of its rows."""
    if isinstance(state, Dependence):
        return state
    if isinstance(state, Written):
        written = None if state.updates is None else gathered(state.updates, state.positions, state.base.size)
        return Dependence(state.shape, union([state.base.pattern, written]))
    if state.pattern is None:
        same = state.value is not None and (state.value == state.value[:1]).all()
        return Dependence(state.shape, None, state.value[0] if same else None)
    every = np.tile(np.arange(state.size, dtype=np.int64), state.trips)
    return Dependence(state.shape, union([state.common, gathered(state.pattern, every, state.size)]))


def last(state, initial: Dependence, carried: Dependence) -> Dependence:
    """The state after the last iteration, given the loop's `initial` state and the shared state
    `carried` the body ran on. A `Written` of the carried value itself is the initial state with
    each written position's last writes (all of that iteration's: duplicates are joined); of
    another value, that value with the last iteration's writes."""
    if isinstance(state, Dependence):
        return state
    if isinstance(state, Iterated):
        block = np.arange((state.trips - 1) * state.size, state.trips * state.size)
        own = None if state.pattern is None else state.pattern.take(block)
        return Dependence(state.shape, union([own, state.common]),
                          None if state.value is None else state.value[-1])
    trips, per = state.positions.shape
    start, positions = (initial if state.base is carried else state.base), state.positions.ravel()
    iteration = np.repeat(np.arange(trips, dtype=np.int64), per)
    latest = np.full(start.size, -1, np.int64)
    landing = (iteration >= 0) if state.base is carried else (iteration == trips - 1)
    np.maximum.at(latest, positions[landing], iteration[landing])
    chosen = landing & (iteration == latest[positions])
    parts = []
    if start.pattern is not None:
        rows = start.pattern.row_ids()
        kept = latest[rows] < 0
        parts.append((rows[kept], start.pattern.indices[kept], start.pattern.columns))
    if state.updates is not None:
        rows = state.updates.take(np.flatnonzero(chosen))
        parts.append((positions[chosen][rows.row_ids()], rows.indices, rows.columns))
    if not parts:
        return Dependence(start.shape)
    return Dependence(start.shape, Pattern.from_pairs(np.concatenate([p[0] for p in parts]), np.concatenate(
        [p[1] for p in parts]), (start.size, parts[0][2])))


def iterated_loop(ctx, body, trips: int, carried, captured):
    """The carried states after `trips` iterations of `body` and its other results per iteration
    (Iterated or shared), walking every iteration at once (a generator; NotIterable: not followed)."""
    semantics = iterated_semantics(ctx.semantics)
    index = Iterated((), trips, None, np.arange(trips, dtype=np.int64))
    shared, k = list(carried), len(carried)
    while True:
        out = yield walk(ctx.module, body, (index, *shared, *captured), semantics, ctx.dims)
        grown = [join(s, everything(o)) for s, o in zip(shared, out[:k])]
        if all(a.same_as(b) for a, b in zip(grown, shared)):
            if any(isinstance(o, Written) for o in out[k:]):
                raise NotIterable("an overwritten value returned per iteration")
            return [last(o, c, s) for o, c, s in zip(out[:k], carried, shared)], out[k:]
        shared = grown
