"""The eager ops along an axis: the softmax family, scans, arg-reductions and integer indexing.

Each is one kernel per signature, as the rest of the eager library (adc/runtime/ops.py, whose
building blocks it uses), under TensorFlow's names; an index out of range raises IndexError
before any kernel runs, as NumPy and TensorFlow do:

    adc.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)   # logsumexp - the label's logit
    adc.gather(table, tokens)                                         # tf.gather: table[tokens]
"""
from __future__ import annotations

import numpy as np

from adc.runtime import stdlib
from adc.runtime.indexing import getitem
from adc.runtime.ops import axes_of, check_broadcast, operands, reduction, unary
from adc.runtime.stdlib import definition, tensor_type
from adc.runtime.tensor import Tensor, numpy_dtype


def reduce_logsumexp(input_tensor, axis=None, keepdims=False):
    """log(sum(exp(x))) over `axis`, shifted by the max so that it neither overflows nor underflows."""
    return reduction("reduce_logsumexp", "logsumexp", input_tensor, axis, keepdims)


def _along_axis(op: str, builtin: str, x, axis: int, result_dtype=None):
    """`builtin(x, axis=axis)` of one float tensor, one kernel per (op, dtype, rank, axis)."""
    (x,) = operands(op, (x,))
    if x.dtype.kind != "f":
        raise TypeError(f"adc.{op} expects a floating tensor, got {x.dtype}")
    (axis,) = axes_of(op, x, axis)
    return unary(op, f"{builtin}(x, axis={axis})", x, "f", result_dtype, (axis,))


def softmax(logits, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`, computed from x - max(x) (tf.nn.softmax)."""
    return _along_axis("softmax", "softmax", logits, axis)


def log_softmax(logits, axis=-1):
    """x - logsumexp(x) along `axis` (tf.nn.log_softmax)."""
    return _along_axis("log_softmax", "log_softmax", logits, axis)


def _scan(op: str, x, axis: int, exclusive: bool, reverse: bool):
    """The language's `op` along `axis`, one kernel per (op, dtype, rank, axis, flags)."""
    (x,) = operands(op, (x,))
    if x.ndim == 0:
        raise ValueError(f"adc.{op} needs a tensor of rank >= 1, got a scalar")
    (axis,) = axes_of(op, x, axis)
    flags = (bool(exclusive), bool(reverse))
    return unary(op, f"{op}(x, axis={axis}, exclusive={flags[0]}, reverse={flags[1]})", x, "if", None,
                  (axis, *flags))


def cumsum(x, axis=0, exclusive=False, reverse=False):
    """Running sums along `axis` (tf.math.cumsum): `exclusive` leaves each element out of its own
    sum (the first is 0), `reverse` sums from the end."""
    return _scan("cumsum", x, axis, exclusive, reverse)


def cumprod(x, axis=0, exclusive=False, reverse=False):
    """Running products along `axis` (tf.math.cumprod); `exclusive` and `reverse` as cumsum's. Its
    gradient is exact at zeros."""
    return _scan("cumprod", x, axis, exclusive, reverse)


def arg_reduction(op: str, x, axis, keepdims: bool):
    """The language's argmax/argmin: int64 indices of the first extreme along `axis`, or into the
    flattened tensor when `axis` is None (NumPy's semantics)."""
    (x,) = operands(op, (x,))
    if axis is not None:
        (axis,) = axes_of(op, x, axis)
    key = (op, x.dtype, x.ndim, axis, bool(keepdims))

    def source():
        dims = [f"D{i}" for i in range(x.ndim)]
        out = [("1" if keepdims else None) if axis is None or i == axis else d for i, d in enumerate(dims)]
        result = tensor_type(np.dtype(np.int64), [d for d in out if d is not None])
        return definition(f"eager_{op}", [("x", tensor_type(x.dtype, dims))], result,
                          f"{op}(x, axis={axis}, keepdims={bool(keepdims)})")

    return stdlib.kernel(key, source)(x)


def argmax(input, axis=None):
    """The int64 index of the first largest element along `axis` (0 by default, as tf.argmax)."""
    return arg_reduction("argmax", input, 0 if axis is None else axis, False)


def argmin(input, axis=None):
    """The int64 index of the first smallest element along `axis` (0 by default, as tf.argmin)."""
    return arg_reduction("argmin", input, 0 if axis is None else axis, False)


def _indices(op: str, indices) -> Tensor:
    (indices,) = operands(op, (indices,), np.dtype(np.int64))
    if indices.dtype.kind not in "iu":
        raise TypeError(f"adc.{op}: indices must be int32 or int64, got {indices.dtype}")
    return indices


def _check_range(op: str, indices: Tensor, n: int, low: int) -> None:
    """IndexError unless every index is in [low, n), before any kernel runs (NumPy raises too)."""
    values = indices.numpy()
    if values.size and (values.min() < low or values.max() >= n):
        bad = values[(values < low) | (values >= n)].flat[0]
        raise IndexError(f"adc.{op}: index {bad} is out of bounds for an axis of size {n}")


def gather(params, indices, axis=0):
    """The slices of `params` at `indices` along `axis` (tf.gather, np.take); an index out of
    range raises IndexError. Its gradient adds repeated slices' cotangents together."""
    (params,) = operands("gather", (params,))
    (axis,) = axes_of("gather", params, axis)
    return getitem(params, (slice(None),) * axis + (_indices("gather", indices),))


def take_along_axis(arr, indices, axis):
    """np.take_along_axis: `indices` has arr's rank and picks along `axis`, broadcasting elsewhere."""
    (arr,) = operands("take_along_axis", (arr,))
    indices = _indices("take_along_axis", indices)
    (axis,) = axes_of("take_along_axis", arr, axis)
    if indices.ndim != arr.ndim:
        raise ValueError(f"adc.take_along_axis: indices of rank {indices.ndim} for an array of rank {arr.ndim}")
    _check_range("take_along_axis", indices, arr.shape[axis], -arr.shape[axis])
    shapes = [tuple(1 if k == axis else d for k, d in enumerate(s)) for s in (arr.shape, indices.shape)]
    check_broadcast("take_along_axis", shapes)
    key = ("take_along_axis", arr.dtype, indices.dtype, arr.shape, indices.shape, axis)

    def source():
        x, i = (tensor_type(t.dtype, [str(d) for d in t.shape]) for t in (arr, indices))
        out = [indices.shape[k] if k == axis else d for k, d in enumerate(np.broadcast_shapes(*shapes))]
        return definition("eager_take_along_axis", [("x", x), ("i", i)], tensor_type(arr.dtype, [str(d) for d in out]),
                          f"take_along_axis(x, i, {axis})")

    return stdlib.kernel(key, source)(arr, indices)


def one_hot(indices, depth, dtype="f32"):
    """A new last axis of `depth`: 1 at each index, 0 elsewhere, and a zero row for an index
    outside [0, depth) (tf.one_hot's defaults)."""
    indices = _indices("one_hot", indices)
    depth, target = int(depth), numpy_dtype(dtype)
    key = ("one_hot", indices.dtype, indices.ndim, depth, target)

    def source():
        dims = [f"D{i}" for i in range(indices.ndim)]
        result = tensor_type(target, dims + [str(depth)])
        return definition("eager_one_hot", [("i", tensor_type(indices.dtype, dims))], result,
                          f"one_hot(i, {depth}, dtype={tensor_type(target, ())})")

    return stdlib.kernel(key, source)(indices)


def sparse_softmax_cross_entropy_with_logits(labels, logits):
    """-log softmax(logits)[label] per example: `labels` are class indices of logits' shape without
    its last axis (TensorFlow's name and argument order); a label outside [0, classes) raises."""
    (logits,) = operands("sparse_softmax_cross_entropy_with_logits", (logits,))
    labels = _indices("sparse_softmax_cross_entropy_with_logits", labels)
    if logits.ndim < 1 or labels.shape != logits.shape[:-1]:
        raise ValueError(f"adc.sparse_softmax_cross_entropy_with_logits: labels of shape {labels.shape} "
                         f"for logits of shape {logits.shape} (labels must have logits' shape without the "
                         f"last axis)")
    _check_range("sparse_softmax_cross_entropy_with_logits", labels, logits.shape[-1], 0)
    key = ("sparse_softmax_cross_entropy", labels.dtype, logits.dtype, labels.ndim)

    def source():
        dims = [f"D{i}" for i in range(labels.ndim)]
        params = [("labels", tensor_type(labels.dtype, dims)), ("logits", tensor_type(logits.dtype, dims + ["C"]))]
        body = "logsumexp(logits, axis=-1) - take_along_axis(logits, labels[..., None], -1)[..., 0]"
        return definition("eager_sparse_softmax_cross_entropy", params, tensor_type(logits.dtype, dims), body)

    return stdlib.kernel(key, source)(labels, logits)
