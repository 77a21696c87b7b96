"""`t[index]` on Tensors and Variables: NumPy's indexing, as a recorded kernel call.

Any index NumPy accepts is validated by NumPy itself (on a zero-cost stand-in of
the tensor's shape), so errors are NumPy's IndexErrors, out-of-range indices
included; then the index is written as one kernel of the language's primitives,
so a tape differentiates it like any other call (the adjoint of an integer index
is a scatter-add: repeated indices accumulate):

    t[1:, ::2]          static slices               x[1:4:1, 0:5:2]
    t[::-1]             a slice, then a reversal    take(x[0:4:1], r, axis=0)
    t[i], t[:, idx]     one integer index           take(x, i, axis=1)
    t[rows, cols]       several, broadcast          take(reshape(x, [20]), flat)
    t[mask]             a boolean mask              its nonzero positions, as above
    t[None], t[..., 0]  new and elided axes         a reshape at the end

Integers and index arrays are kernel arguments, not part of the kernel, so
`for row in t` or `t[i]` in a loop compiles one kernel per shape, not per index.
Integers mixed with index arrays follow NumPy's rule for advanced indices: their
result axes stand in place when the indexed axes are adjacent, else in front.
"""
from __future__ import annotations

import numpy as np

from adc.runtime import stdlib
from adc.runtime.stdlib import tensor_type
from adc.runtime.tensor import Tensor
from adc.runtime.variable import Variable


def getitem(x, index):
    """x[index] with NumPy's semantics and errors; a Tensor, recorded on tapes."""
    array = x._array if type(x) is Tensor else x.value()._array
    items = _plain(index if isinstance(index, tuple) else (index,))
    target = np.broadcast_to(np.empty((), np.bool_), array.shape)[items].shape   # NumPy's checks
    axes = _per_axis(items, array.shape)
    params, args, shape = [("x", tensor_type(array.dtype, _dims(array.shape)))], [x], array.shape

    slices = [":" if not isinstance(a, slice) else _slice_text(a, n) for a, n in zip(axes, array.shape)]
    expr = f"x[{', '.join(slices)}]" if any(s != ":" for s in slices) else "x"
    shape = tuple(len(range(*a.indices(n))) if isinstance(a, slice) else n for a, n in zip(axes, shape))
    for axis, a in enumerate(axes):
        if isinstance(a, slice) and a.indices(array.shape[axis])[2] < 0 and shape[axis] > 1:
            name = f"r{axis}"
            params.append((name, tensor_type(np.dtype(np.int64), [str(shape[axis])])))
            args.append(np.arange(shape[axis] - 1, -1, -1, dtype=np.int64))
            expr = f"take({expr}, {name}, axis={axis})"

    picked = [axis for axis, a in enumerate(axes) if not isinstance(a, slice)]
    if picked:
        expr, shape = _advanced(expr, shape, picked, [axes[a] for a in picked], params, args)
    if shape != target:
        expr = f"reshape({expr}, [{', '.join(map(str, target))}])"
    source = (f"def eager_getitem({', '.join(f'{p}: {t}' for p, t in params)}) -> "
              f"{tensor_type(array.dtype, _dims(target))}:\n    return {expr}\n")
    return stdlib.kernel(("getitem", source), lambda: ("eager_getitem", source))(*args)


def _plain(items: tuple) -> tuple:
    """Tensors, Variables and lists among the items as NumPy arrays (NumPy's own index forms; an
    empty list indexes nothing, as in NumPy)."""
    out = []
    for item in items:
        if isinstance(item, (Tensor, Variable, list)):
            item = np.asarray(item)
            if item.size == 0 and item.dtype.kind == "f":
                item = item.astype(np.int64)
        out.append(item)
    return tuple(out)


def _per_axis(items: tuple, shape: tuple[int, ...]) -> list:
    """One entry per axis of x: a slice, or an int64 array of non-negative indices into that axis.
    `None`s are dropped (the final reshape restores them) and `...` is expanded; a boolean mask
    stands for the integer arrays of its nonzero positions."""
    expanded = []
    for item in items:
        if isinstance(item, (np.ndarray, np.bool_, bool)) and np.asarray(item).dtype == np.bool_:
            expanded.extend(np.nonzero(np.asarray(item)))
        elif item is not None:
            expanded.append(item)
    if any(item is Ellipsis for item in expanded):
        at = expanded.index(Ellipsis)
        expanded[at:at + 1] = [slice(None)] * (len(shape) - len(expanded) + 1)
    expanded += [slice(None)] * (len(shape) - len(expanded))
    return [item if isinstance(item, slice) else np.asarray(item, np.int64) % max(n, 1)
            for item, n in zip(expanded, shape)]


def _slice_text(s: slice, n: int) -> str:
    """The slice as the language writes it: static, with a positive step (a negative one covers
    the same elements in increasing order and is reversed afterwards)."""
    start, stop, step = s.indices(n)
    count = len(range(start, stop, step))
    if step < 0:
        start, step = start + step * (count - 1), -step
    if count == 0:
        return "0:0"
    return f"{start}:{start + step * (count - 1) + 1}:{step}"


def _advanced(expr: str, shape: tuple[int, ...], picked: list[int], indices: list[np.ndarray],
              params: list, args: list) -> tuple[str, tuple[int, ...]]:
    """`expr` indexed along the axes `picked` by the broadcast integer arrays `indices`: one take of
    the flat position, NumPy's placement of the result axes."""
    indices = np.broadcast_arrays(*indices)
    picked_shape = indices[0].shape
    params.append(("i", tensor_type(np.dtype(np.int64), _dims(picked_shape))))
    if len(picked) == 1:
        args.append(np.array(indices[0], np.int64))
        axis = picked[0]
        return f"take({expr}, i, axis={axis})", shape[:axis] + picked_shape + shape[axis + 1:]
    rest = [a for a in range(len(shape)) if a not in picked]
    if picked != list(range(len(picked))):
        expr = f"transpose({expr}, perm={picked + rest})"
    flat = int(np.prod([shape[a] for a in picked]))
    kept = [shape[a] for a in rest]
    expr = f"take(reshape({expr}, [{', '.join(map(str, [flat] + kept))}]), i)"
    args.append(np.ravel_multi_index(tuple(indices), [shape[a] for a in picked]).astype(np.int64))
    adjacent = picked == list(range(picked[0], picked[-1] + 1))
    front = picked[0] if adjacent else 0
    if front:   # the result axes go where the indexed ones were
        k = len(picked_shape)
        perm = list(range(k, k + front)) + list(range(k)) + list(range(k + front, k + len(kept)))
        expr = f"transpose({expr}, perm={perm})"
    return expr, tuple(kept[:front]) + picked_shape + tuple(kept[front:])


def _dims(shape: tuple[int, ...]) -> list[str]:
    return [str(d) for d in shape]
