"""Indexing by integer tensors: gather, scatter_add, scatter.

The index rule: an index i into an axis of size n reads position i + n when i < 0 (once: -1
is the last), then clamped to [0, n-1]; an axis of size 0 is never read (gather gives 0,
scatter_add drops the update). Native code never reads or writes out of bounds, and the
interpreter applies the same rule.
"""
from __future__ import annotations

from adc.ir.ops.record import define, example, require
from adc.ir.types import BOOL, Dim, TensorType


def gathered_shape(x: TensorType, indices: TensorType, axis: int) -> tuple[Dim, ...]:
    """np.take's shape: x's axes before `axis`, then the indices' axes, then x's axes after."""
    return x.shape[:axis] + indices.shape + x.shape[axis + 1:]


def _check_indexing(x: TensorType, indices: TensorType, axis) -> None:
    require(isinstance(axis, int) and not isinstance(axis, bool) and 0 <= axis < x.rank,
            f"axis {axis!r} out of range for {x}")
    require(indices.dtype.is_int, f"indices must be an i32 or i64 tensor, got {indices}")


def _gather_rule(types, attrs, funcs):
    x, indices = types
    _check_indexing(x, indices, attrs["axis"])
    return (TensorType(x.dtype, gathered_shape(x, indices, attrs["axis"])),)


define("gather", "np.take(x, indices, axis): the slices of x along `axis` at each index "
       "(the index rule of adc/ir/ops/indexing.py)",
       example("%x: f32[N,M], %i: i64[B]", "  %0 = gather %x, %i {axis = 0} : f32[B,M]\n  return %0",
               "f32[B,M]"),
       _gather_rule, 2, ("axis",), traits=("indexing", "index_map"), linear=(0,))


def _scatter_add_rule(types, attrs, funcs):
    require(types[0].dtype is not BOOL, f"cannot add into {types[0]}")
    return _scatter_rule(types, attrs, funcs)


def _scatter_rule(types, attrs, funcs):
    base, indices, updates = types
    axis = attrs["axis"]
    _check_indexing(base, indices, axis)
    expected = TensorType(base.dtype, gathered_shape(base, indices, axis))
    require(updates == expected, f"updates must be {expected} ({base} indexed by {indices} along axis {axis}), "
                                  f"got {updates}")
    return (base,)


define("scatter_add", "base with each slice of updates added at its index along `axis` "
       "(np.add.at; duplicates accumulate; the index rule of adc/ir/ops/indexing.py)",
       example("%b: f32[N,M], %i: i64[B], %u: f32[B,M]",
               "  %0 = scatter_add %b, %i, %u {axis = 0} : f32[N,M]\n  return %0", "f32[N,M]"),
       _scatter_add_rule, 3, ("axis",), traits=("indexing", "scatter", "updates", "materializes"), linear=(0, 2))
define("scatter", "base with each slice of updates written at its index along `axis`; of duplicate "
       "indices the last in row-major order of the indices wins (the index rule of adc/ir/ops/indexing.py)",
       example("%b: f32[N,M], %i: i64[B], %u: f32[B,M]",
               "  %0 = scatter %b, %i, %u {axis = 0} : f32[N,M]\n  return %0", "f32[N,M]"),
       _scatter_rule, 3, ("axis",), traits=("indexing", "scatter", "updates", "materializes"), linear=(0, 2))

