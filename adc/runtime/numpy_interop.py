"""NumPy's functions on Tensors and Variables: `np.sin(t)`, `np.sum(t, axis=0)`, `a @ t` ...

NumPy hands a call with a Tensor among its operands to `__array_ufunc__` (for
ufuncs: np.sin, np.add, ...) or `__array_function__` (np.sum, np.reshape, ...).
A function with an adc op is that op, so it is recorded on tapes like `adc.sin`:

    with adc.GradientTape() as tape:
        y = np.sum(np.sin(x) * x)       # eager_sin, eager_multiply, eager_reduce_sum
    tape.gradient(y, x)

Any other function runs on the values with NumPy and returns NumPy's result, as
for an array, except when a recorder (a tape, an accumulator) watches one of its
operands and the result is floating point: then the result would silently drop
off the tape, so it raises a TypeError that names the function instead.
"""
from __future__ import annotations

import inspect

import numpy as np

from adc.ir.ops import OPS
from adc.runtime import axis_ops, linalg, lu, ops, orthogonal
from adc.runtime.namespaces import math_ops
from adc.runtime.indexing import getitem
from adc.runtime.recording import thread_state
from adc.runtime.tensor import Tensor
from adc.runtime.variable import Variable

# A ufunc computing an op that is a builtin is that builtin's eager function (the op records name both).
_BUILTINS = ops.BUILTIN_UNARY | ops.BUILTIN_BINARY
UFUNCS = {getattr(np, op.ufunc): _BUILTINS[op.builtin] for op in OPS.values() if op.ufunc and op.builtin} | {
    np.negative: ops.negative, np.add: ops.add, np.subtract: ops.subtract, np.multiply: ops.multiply,
    np.divide: ops.divide, np.power: ops.pow_, np.matmul: ops.matmul,
    np.less: ops.less, np.less_equal: ops.less_equal, np.greater: ops.greater,
    np.greater_equal: ops.greater_equal, np.equal: ops.equal, np.not_equal: ops.not_equal,
    np.square: lambda x: ops.pow_(x, 2), np.positive: lambda x: x,
    np.arctan: math_ops.atan, np.arcsin: math_ops.asin, np.arccos: math_ops.acos,
}
REDUCTIONS = {np.add: ops.reduce_sum, np.multiply: ops.reduce_prod, np.maximum: ops.reduce_max,
              np.minimum: ops.reduce_min}


def _reduction(op):
    def reduction(a, axis=None, keepdims=False):
        return op(a, axis, keepdims)

    return reduction


def _reshape(a, shape=None, *, newshape=None):
    return ops.reshape(a, shape if newshape is None else newshape)


def _take(a, indices, axis=None):
    return getitem(ops.reshape(a, [-1]) if axis is None else a, (slice(None),) * (axis % a.ndim) + (indices,))


def _scan(op):
    def scan(a, axis=None):
        # NumPy's axis=None scans the flattened array
        return op(ops.reshape(a, [-1]), 0) if axis is None else op(a, axis)

    return scan


def _expand_dims(a, axis):
    return getitem(a, (slice(None),) * (axis % (a.ndim + 1)) + (None,))


def _squeeze(a, axis=None):
    axes = {i for i, d in enumerate(a.shape) if d == 1} if axis is None else {
        int(i) % a.ndim for i in np.atleast_1d(axis)}
    return ops.reshape(a, [d for i, d in enumerate(a.shape) if i not in axes])


def _cholesky(a, /, *, upper=False):
    # NumPy's `upper`: the transpose of the lower factor
    factor = linalg.cholesky(a)
    return ops.transpose(factor, list(range(factor.ndim - 2)) + [factor.ndim - 1, factor.ndim - 2]) if upper else factor


FUNCTIONS = {
    np.sum: _reduction(ops.reduce_sum), np.mean: _reduction(ops.reduce_mean),
    np.max: _reduction(ops.reduce_max), np.min: _reduction(ops.reduce_min),
    np.amax: _reduction(ops.reduce_max), np.amin: _reduction(ops.reduce_min),
    np.prod: _reduction(ops.reduce_prod), np.transpose: lambda a, axes=None: ops.transpose(a, axes),
    np.reshape: _reshape, np.concatenate: lambda arrays, axis=0: ops.concat(arrays, axis),
    np.stack: lambda arrays, axis=0: ops.stack(arrays, axis), np.dot: lambda a, b: ops.matmul(a, b),
    np.where: lambda condition, x, y: ops.where(condition, x, y),
    np.clip: lambda a, a_min, a_max: ops.clip_by_value(a, a_min, a_max),
    np.take: _take, np.expand_dims: _expand_dims, np.squeeze: _squeeze,
    np.argmax: lambda a, axis=None, *, keepdims=False: axis_ops.arg_reduction("argmax", a, axis, keepdims),
    np.argmin: lambda a, axis=None, *, keepdims=False: axis_ops.arg_reduction("argmin", a, axis, keepdims),
    np.take_along_axis: lambda arr, indices, axis: axis_ops.take_along_axis(arr, indices, axis),
    np.cumsum: _scan(axis_ops.cumsum), np.cumprod: _scan(axis_ops.cumprod),
    np.linalg.cholesky: _cholesky,
    np.linalg.solve: lu.solve, np.linalg.inv: lu.inv, np.linalg.det: lu.det, np.linalg.slogdet: lu.slogdet,
    np.linalg.qr: orthogonal.qr, np.linalg.lstsq: orthogonal.lstsq,
    np.linalg.eigh: orthogonal.eigh, np.linalg.eigvalsh: orthogonal.eigvalsh, np.linalg.svd: orthogonal.svd,
}


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """A ufunc call with a Tensor or Variable among `inputs` (NumPy's protocol)."""
    if method == "__call__" and ufunc in UFUNCS and not kwargs:
        return UFUNCS[ufunc](*inputs)
    if method == "reduce" and ufunc in REDUCTIONS and len(inputs) == 1 and set(kwargs) <= {"axis", "keepdims"}:
        return REDUCTIONS[ufunc](inputs[0], kwargs.get("axis", 0), kwargs.get("keepdims", False))
    name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
    return _on_values(f"numpy.{name}", getattr(ufunc, method), inputs, kwargs)


def array_function(self, func, types, args, kwargs):
    """A NumPy function call with a Tensor or Variable among its arguments (NumPy's protocol)."""
    op = FUNCTIONS.get(func)
    if op is not None and _binds(op, args, kwargs):
        return op(*args, **kwargs)
    return _on_values(f"numpy.{func.__name__}", func, args, kwargs)


def _binds(op, args, kwargs) -> bool:
    """Whether the call uses only the parameters adc's op takes (others go to NumPy)."""
    try:
        inspect.signature(op).bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def _on_values(name: str, func, args, kwargs):
    """`func` on the NumPy values of the Tensors and Variables in `args`; a TypeError instead when a
    recorder watches one of them and the result is floating point (it would not be recorded)."""
    tensors = [a for a in _leaves((args, kwargs)) if type(a) in (Tensor, Variable)]
    result = func(*_values(args), **_values(kwargs))
    if any(np.asarray(r).dtype.kind in "fc" for r in _leaves(result)) and _watched(tensors):
        raise TypeError(f"{name} has no adc op, so its result would not be recorded on the tape that "
                        "watches its operand; use the adc op (docs/autodiff.md lists them), or call "
                        "it on t.numpy() to leave the tape on purpose")
    return result


def _watched(tensors: list) -> bool:
    return any(recorder.watching(tuple(tensors)) for recorder in thread_state.recording)


def _values(tree):
    """`tree` with each Tensor or Variable replaced by its NumPy value (lists, tuples, dicts kept)."""
    if type(tree) in (Tensor, Variable):
        return tree.numpy()
    if isinstance(tree, (list, tuple)):
        return type(tree)(_values(t) for t in tree)
    if isinstance(tree, dict):
        return {k: _values(v) for k, v in tree.items()}
    return tree


def _leaves(tree):
    if isinstance(tree, (list, tuple)):
        for t in tree:
            yield from _leaves(t)
    elif isinstance(tree, dict):
        yield from _leaves(list(tree.values()))
    else:
        yield tree


for _cls in (Tensor, Variable):
    _cls.__array_ufunc__ = array_ufunc
    _cls.__array_function__ = array_function
