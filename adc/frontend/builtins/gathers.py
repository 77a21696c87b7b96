"""The builtins that index by integer tensors: take, take_along_axis, scatter, scatter_add.

Part of the builtins (`adc/frontend/builtins/__init__.py` gathers the families' tables).
Indices follow adc's index rule (docs/language.md): counted from the end once when negative,
then clamped; everything becomes `gather`, `scatter` and `scatter_add` along one axis:

    take(x, i, axis=1)     %0 = gather %x, %i {axis = 1} : f32[B,K]      (x: f32[B,N], i: i64[K])
"""
from __future__ import annotations

from adc.frontend.arguments import Args, Builtin, registrar
from adc.frontend.scope import Scope, index_tensor
from adc.ir.core import Value
from adc.ir.ops import gathered_shape
from adc.ir.types import BOOL, TensorType, num_elements

builtin_rules: dict[str, Builtin] = {}
builtin = registrar(builtin_rules)


def _indices_arg(a: Args, key: str) -> Value:
    with a.cx.b.at(a.values[key][1]):
        return index_tensor(a.cx, a[key])


@builtin("take", "x", "indices", axis=0)
def take_expand(cx, a):
    x = a.tensor("x")
    # np.take(x, indices, axis) under adc's index rule (docs/language.md)
    return cx.op("gather", x, _indices_arg(a, "indices"), axis=a.axis("axis", x.type.rank))


@builtin("take_along_axis", "x", "indices", "axis")
def take_along_axis_expand(cx, a):
    # np.take_along_axis under the index rule: each index counted from the end once when negative and
    # clamped along `axis`, then offset by its row into one gather from x flattened with `axis` last
    x = a.tensor("x")
    indices = _indices_arg(a, "indices")
    rank = x.type.rank
    axis = a.axis("axis", rank)
    if indices.type.rank != rank:
        raise a.error("indices", f"take_along_axis needs indices of x's rank {rank}, got {indices.type}")
    if any(k not in (1, n) for d, (n, k) in enumerate(zip(x.type.shape, indices.type.shape)) if d != axis):
        raise a.error("indices", f"indices {indices.type} do not broadcast against x {x.type} "
                                 f"outside axis {axis}")
    return take_along(cx, x, indices, axis)


def take_along(cx: Scope, x: Value, indices: Value, axis: int) -> Value:
    """np.take_along_axis(x, indices, axis) under the index rule, `indices` of x's rank broadcasting
    against x outside `axis` (checked by the caller); shared with the LU solves (builtins/lu.py)."""
    rank = x.type.rank
    shape = tuple(k if d == axis else n for d, (n, k) in enumerate(zip(x.type.shape, indices.type.shape)))
    perm = tuple(d for d in range(rank) if d != axis) + (axis,)
    rows_shape = tuple(shape[d] for d in perm[:-1])
    n, k, rows = x.type.shape[axis], shape[axis], num_elements(rows_shape)
    i = cx.reshape(cx.transpose(cx.op("broadcast", indices, dims=tuple(range(rank)), shape=shape)
                                if indices.type.shape != shape else indices, perm), (rows, k))
    size = cx.tensor(n, i.type.dtype)
    i = cx.select(cx.elementwise("lt", i, 0), cx.elementwise("add", i, size), i)
    i = cx.elementwise("maximum", cx.elementwise("minimum", i, cx.elementwise("sub", size, 1)), 0)
    offsets = cx.elementwise("mul", cx.op("iota", axis=0, dtype=i.type.dtype, shape=(rows, k)), size)
    flat = cx.reshape(cx.transpose(x, perm), (num_elements(rows_shape + (n,)),))
    taken = cx.reshape(cx.op("gather", flat, cx.elementwise("add", i, offsets), axis=0), rows_shape + (k,))
    return cx.transpose(taken, tuple(sorted(range(rank), key=lambda d: perm[d])))


@builtin("scatter_add", "base", "indices", "updates", axis=0)
def scatter_add_expand(cx, a):
    # np.add.at on a copy of base: duplicate indices accumulate
    if a.tensor("base").type.dtype is BOOL:
        raise a.error("base", f"cannot add into {a.tensor('base').type}")
    return _scatter(cx, a, "scatter_add")


@builtin("scatter", "base", "indices", "updates", axis=0)
def scatter_expand(cx, a):
    # base[..., indices, ...] = updates on a copy of base: of duplicate indices the last one stays
    return _scatter(cx, a, "scatter")


def _scatter(cx, a, name: str) -> Value:
    base = a.tensor("base")
    axis = a.axis("axis", base.type.rank)
    indices = _indices_arg(a, "indices")
    updates = a.tensor("updates", base.type.dtype)
    expected = TensorType(base.type.dtype, gathered_shape(base.type, indices.type, axis))
    if updates.type.dtype != base.type.dtype:
        raise a.error("updates", f"updates must be {base.type.dtype} like base, got {updates.type}")
    with cx.b.at(a.values["updates"][1]):
        updates = cx.broadcast(updates, expected.shape) if _broadcasts(updates.type, expected) else updates
    if updates.type != expected:
        raise a.error("updates", f"updates must be {expected} ({base.type} indexed by {indices.type} "
                                 f"along axis {axis}), got {updates.type}")
    return cx.op(name, base, indices, updates, axis=axis)


def _broadcasts(t: TensorType, to: TensorType) -> bool:
    """True when NumPy broadcasting takes `t` to `to` without changing `to` (np.add.at allows it)."""
    if t.rank > to.rank:
        return False
    return all(s == 1 or s == d for s, d in zip(t.shape, to.shape[to.rank - t.rank:]))
