"""Indexing in kernels: `x[items]` (NumPy's basic indexing, and one integer tensor) and `y[items] = v`.

Part of elaboration (`elaborate.py` calls it for `ast.Index` and `ast.IndexAssign`). Every item
first gets its meaning against the axis it indexes (`item_meanings`): a new axis (`None`), clamped
slice bounds, a static position (bounds-checked), or an integer tensor. An integer scalar (a loop
counter, an `i64` parameter, an `argmax`) indexes like a static integer, dropping its axis, but
as a rank-0 `gather`: its value is known only when the kernel runs, so it follows gather's index
rule (wrap once when negative, then clamp) instead of a compile-time bounds check.

    def f(p: f32[N, M], b: i64) -> f32[M-1]:   %0 = slice %p {start = [0,1], step = [1,1], stop = [N,M]} : f32[N,M-1]
        return p[b, 1:]                          %1 = gather %0, %b {axis = 0} : f32[M-1]

An assignment gathers the part each index item names, innermost last, and scatters the updated
part back outwards (a slice there is the integer tensor of its positions), so a loop that writes
`traj[i, 1:3] = v` updates its buffer in place.
"""
from __future__ import annotations

from typing import Union

from adc.errors import CompileError
from adc.frontend import ast
from adc.frontend.scope import Deferred, describe, index_tensor, is_static
from adc.ir.core import Value
from adc.ir.types import I64, Dim, TensorType

NEW_AXIS = None     # the meaning of a `None` item
Bounds = tuple       # a slice's clamped (start, stop, step)
Meaning = Union[None, Bounds, Dim, Value]


def read(cx, e: ast.Index):
    """The value of `x[items]`, elaborated on cx's trampoline (sub-expressions are yielded)."""
    value = yield e.value
    value = cx.tensor(value) if isinstance(value, Deferred) else value
    if not isinstance(value, Value):
        raise CompileError(f"only tensors can be indexed, not {describe(value)}", e.loc)
    items = index_items(e, value.type)
    meanings = yield from item_meanings(cx, items, value.type)
    if any(isinstance(m, Value) and m.type.rank > 0 for m in meanings):
        return _take(cx, value, items, meanings)
    starts, stops, steps, layout = [], [], [], []   # layout: per result axis, its operand axis or None
    gathered = []       # (item, operand axis) of each integer scalar
    axis = 0
    for k, meaning in enumerate(meanings):
        if meaning is NEW_AXIS:
            layout.append(None)
            continue
        size = value.type.shape[axis]
        if isinstance(meaning, tuple):
            bounds = meaning
            layout.append(axis)
        elif isinstance(meaning, Value):    # an integer scalar: its axis is gathered below
            bounds = (0, size, 1)
            gathered.append((k, axis))
        else:
            bounds = (meaning, meaning + 1, 1)
        for out, bound in zip((starts, stops, steps), bounds):
            out.append(bound)
        axis += 1
    whole = starts == [0] * value.type.rank and stops == list(value.type.shape) and steps == [1] * value.type.rank
    part = value if whole else cx.op("slice", value, start=starts, stop=stops, step=steps)
    shape = part.type.shape
    for k, axis in reversed(gathered):      # the last axis first, so the earlier ones keep their numbers
        with cx.b.at(items[k].loc):
            part = cx.op("gather", part, meanings[k], axis=axis)
    return cx.reshape(part, [1 if a is None else shape[a] for a in layout])


def index_items(e: ast.Index, t: TensorType) -> tuple:
    """The items of `e`, its `...` (or the missing trailing items) spelled as whole-axis slices."""
    ellipses = [item for item in e.items if isinstance(item, ast.EllipsisItem)]
    if len(ellipses) > 1:
        raise CompileError("an index can have only one ellipsis ('...')", ellipses[1].loc)
    consumed = sum(not isinstance(item, ast.EllipsisItem) and not _is_new_axis(item) for item in e.items)
    if consumed > t.rank:
        raise CompileError(f"too many indices ({consumed}) for {t}", e.loc)
    fill = (ast.Slice(None, None, None, e.loc),) * (t.rank - consumed)
    at = e.items.index(ellipses[0]) if ellipses else len(e.items)
    return e.items[:at] + fill + e.items[at + 1:]


def item_meanings(cx, items: tuple, t: TensorType):
    """What each item means against the axis of `t` it indexes: NEW_AXIS, a slice's clamped bounds,
    a static position, or an i32/i64 index tensor (rank 0 for an integer scalar)."""
    meanings: list[Meaning] = []
    axis = 0
    for item in items:
        if _is_new_axis(item):
            meanings.append(NEW_AXIS)
            continue
        size = t.shape[axis]
        if isinstance(item, ast.Slice):
            meanings.append((yield from _slice_bounds(item, size)))
        else:
            point = yield item
            with cx.b.at(item.loc):
                meanings.append(index_position(item, point, size) if is_static(point) else index_tensor(cx, point))
        axis += 1
    return meanings


def index_position(e: ast.Expr, i: object, size: Dim) -> Dim:
    """The static integer index `i` (the value of `e`); negative counts from the end; static sizes are
    bounds-checked."""
    position = size + i if isinstance(i, int) and i < 0 else i
    if isinstance(size, int) and not 0 <= position < size:
        raise CompileError(f"index {i} is out of bounds for a dimension of size {size}", e.loc)
    if isinstance(position, int) and position < 0:
        raise CompileError(f"index {i} is out of bounds for a dimension of size {size}", e.loc)
    return position


def _take(cx, value: Value, items: tuple, meanings: list) -> Value:
    """`x[..., idx, ...]` with one integer tensor `idx` among whole slices: take(x, idx, axis),
    under the index rule of docs/language.md."""
    axis = _tensor_axis(items, meanings, value.type)
    with cx.b.at(items[axis].loc):
        return cx.op("gather", value, meanings[axis], axis=axis)


def _tensor_axis(items: tuple, meanings: list, t: TensorType) -> int:
    """The axis of the one integer tensor among `meanings`, all others whole slices: NumPy's other
    advanced indexing (which moves the tensor's axes first when integers stand apart) is not
    supported."""
    axis = next(k for k, m in enumerate(meanings) if isinstance(m, Value) and m.type.rank > 0)
    sizes = iter(t.shape)
    for k, (item, meaning) in enumerate(zip(items, meanings)):
        size = None if meaning is NEW_AXIS else next(sizes)
        if k != axis and not _whole(meaning, size):
            raise CompileError("an integer tensor index can only be combined with ':' and '...' "
                               "(one tensor index, the other axes whole)", item.loc)
    return axis


def _whole(meaning: Meaning, size: Dim | None) -> bool:
    return isinstance(meaning, tuple) and meaning == (0, size, 1)


def _slice_bounds(s: ast.Slice, size: Dim):
    """NumPy's start:stop:step with a positive static step; static sizes clamp like NumPy."""
    step = 1 if s.step is None else (yield from _static_bound(s.step, "step"))
    if not isinstance(step, int) or step < 1:
        raise CompileError(f"a slice step must be a positive integer, got {step}", s.step.loc)
    start = 0 if s.start is None else (yield from _slice_bound(s.start, size))
    stop = size if s.stop is None else (yield from _slice_bound(s.stop, size))
    if isinstance(start, int) and isinstance(stop, int) and stop < start:
        stop = start
    return start, stop, step


def _slice_bound(e: ast.Expr, size: Dim):
    i = yield from _static_bound(e, "bound")
    bound = size + i if isinstance(i, int) and i < 0 else i
    if isinstance(size, int):
        return min(max(bound, 0), size)
    if isinstance(bound, int) and bound < 0:
        raise CompileError(f"slice bound {i} is out of bounds for a dimension of size {size}", e.loc)
    return bound


def _static_bound(e: ast.Expr, what: str):
    value = yield e
    if not is_static(value):
        raise CompileError(f"a slice {what} must be a static integer (a literal or a dimension expression: it "
                           f"sets the result's shape), got {describe(value)}; a computed integer can index one "
                           "element (x[b]) or, as an integer tensor, several (take(x, indices))", e.loc)
    return value


# ---------------------------------------------------------------- indexed assignment

def assign(cx, stmt: ast.IndexAssign) -> Value:
    """`y[items] = v` as a functional update: the items are integers (static, or integer scalars),
    slices, `None`, `...`, or one integer tensor among whole slices; each item that selects gathers
    the part it names, and the updated part is scattered back (NumPy's assignment, under the index
    rule of gather)."""
    target = cx.expr(stmt.target)
    if not isinstance(target, Value):
        raise CompileError(f"only a tensor can be assigned by index, '{stmt.target.id}' is {describe(target)}",
                           stmt.target.loc)
    items = index_items(ast.Index(stmt.target, stmt.items, stmt.loc), target.type)
    meanings = cx.drive(item_meanings(cx, items, target.type))
    if any(isinstance(m, Value) and m.type.rank > 0 for m in meanings):
        _tensor_axis(items, meanings, target.type)      # the rule of a read
    points, new_axes = _selections(cx, items, meanings, target.type)
    parts = [target]
    for axis, index, loc in points[:-1]:
        with cx.b.at(loc):
            parts.append(cx.op("gather", parts[-1], index, axis=axis))
    if points:
        axis, index, _ = points[-1]
        shape = parts[-1].type.shape[:axis] + index.type.shape + parts[-1].type.shape[axis + 1:]
    else:
        shape = target.type.shape
    update = _assigned_value(cx, cx.expr(stmt.value), target, shape, new_axes, stmt)
    for (axis, index, loc), base in zip(reversed(points), reversed(parts)):
        with cx.b.at(loc):
            update = cx.op("scatter", base, index, update, axis=axis)
    return update


def _selections(cx, items: tuple, meanings: list, t: TensorType) -> tuple[list, list[int]]:
    """The items that select part of an axis, as (axis of the part gathered so far, index tensor,
    location), a slice as the tensor of its positions; and where `None` puts a new axis of the part."""
    points, new_axes = [], []
    axis = 0        # the axes of the part the items before have left
    operand_axis = 0
    for item, meaning in zip(items, meanings):
        if meaning is NEW_AXIS:
            new_axes.append(axis + len(new_axes))
            continue
        size = t.shape[operand_axis]
        operand_axis += 1
        if _whole(meaning, size):
            axis += 1
            continue
        with cx.b.at(item.loc):
            index = _positions(cx, meaning, size) if isinstance(meaning, tuple) else index_tensor(cx, meaning)
        points.append((axis, index, item.loc))
        axis += index.type.rank
    return points, new_axes


def _positions(cx, bounds: Bounds, size: Dim) -> Value:
    """start:stop:step's positions in an axis of `size`, as an i64 vector: the integer tensor a
    slice stands for (the slice op checks the bounds as it does for a read)."""
    axis = cx.op("iota", axis=0, dtype=I64, shape=[size])
    return cx.op("slice", axis, start=[bounds[0]], stop=[bounds[1]], step=[bounds[2]])


def _assigned_value(cx, value: object, base: Value, shape: tuple, new_axes: list[int],
                    stmt: ast.IndexAssign) -> Value:
    """`value` broadcast to the `shape` of the part of `base` it replaces, in base's dtype; it must
    broadcast to that part as NumPy shows it, with the axes of size 1 `None` adds."""
    shown = list(shape)
    for at in new_axes:
        shown.insert(at, 1)
    with cx.b.at(stmt.value.loc):
        value = cx.tensor(value, base.type.dtype)
        fits = value.type.rank <= len(shown) and all(
            d == 1 or d == s for d, s in zip(value.type.shape[::-1], shown[::-1]))
        if value.type.dtype != base.type.dtype or not fits:
            raise CompileError(f"cannot assign {value.type} to an element of {base.type}, of shape "
                               f"({', '.join(map(str, shown))}{',' if len(shown) == 1 else ''})", stmt.loc)
        return cx.reshape(cx.broadcast(value, tuple(shown)), shape)


def _is_new_axis(item) -> bool:
    return isinstance(item, ast.Name) and item.id == "None"
