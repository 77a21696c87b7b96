"""The NumPy twin of a generated adc program: the same kernels as Python functions over arrays.

The fuzz generator (tests/support/programs.py) writes each kernel twice, in adc and in
Python; this module runs the Python side. Its functions give adc's builtins their
documented meaning, in the operands' own dtype as adc computes (an f32 kernel's twin
computes in float32, NumPy's weak Python scalars keep it there):

    def f(x, w):                          def f(x: f32[N], w: f32[N, 3]) -> f32[N]:
        N = x.shape[0]                        return relu(x) * sum(w, axis=1)
        return _relu(x) * _sum(w, (1,), False)

`Twin.frozen_at(args)` is the function the derivative of the program differentiates:
every `stop_gradient` operand keeps its value at `args`, so finite differences of it
give what the VJP should.
"""
from __future__ import annotations

import math
import warnings
from typing import Callable

import numpy as np
import scipy.linalg

_ERF = np.vectorize(math.erf, otypes=[np.float64])
_ERFC = np.vectorize(math.erfc, otypes=[np.float64])
_LGAMMA = np.vectorize(math.lgamma, otypes=[np.float64])


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    # adc's formula: x > 0 ? x + log1p(exp(-x)) : log1p(exp(x))
    above = x > 0
    return np.where(above, x, 0) + np.log1p(np.exp(np.where(above, -x, x)))


def _relu(x):
    return np.where(x <= 0, 0, x)


def _elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def _sum(x, axis, keepdims):
    return np.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


def _prod(x, axis, keepdims):
    return np.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


def _mean(x, axis, keepdims):
    return np.mean(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


def _max(x, axis, keepdims):
    # adc's max of nothing is the least value of the dtype, as the interpreter's
    return np.max(x, axis=axis, keepdims=keepdims, initial=_extreme(x.dtype, -1))


def _min(x, axis, keepdims):
    return np.min(x, axis=axis, keepdims=keepdims, initial=_extreme(x.dtype, 1))


def _extreme(dtype, sign: int):
    if dtype.kind == "f":
        return sign * np.inf
    return np.iinfo(dtype).max if sign > 0 else np.iinfo(dtype).min


def _norm(x, axis, keepdims):
    return np.sqrt(_sum(x * x, axis, keepdims))


def _shift(x, axis, finite: bool):
    # adc's (and SciPy's) shift by the max, 0 where it is not finite for logsumexp and log_softmax
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    return np.where(np.isfinite(m), m, np.zeros((), x.dtype)) if finite else m


def _logsumexp(x, axis, keepdims):
    m = _shift(x, axis, True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _softmax(x):
    e = np.exp(x - _shift(x, None, False))
    return e / np.sum(e, keepdims=True)


def _log_softmax(x):
    shifted = x - _shift(x, None, True)
    return shifted - np.log(np.sum(np.exp(shifted), keepdims=True))


def _cast(x, dtype):
    # float to int truncates toward zero, as adc's convert
    return np.asarray(x).astype(dtype)


def _argmax(x, axis):
    # adc's index of an axis empty at run time is 0 (NumPy raises)
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return np.argmax(x, axis=axis).astype(np.int64) if x.shape[axis] else np.zeros(shape, np.int64)


def _argmin(x, axis):
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return np.argmin(x, axis=axis).astype(np.int64) if x.shape[axis] else np.zeros(shape, np.int64)


def _one_hot(indices, depth, dtype):
    # tf.one_hot: a zero row for an index outside [0, depth), negative ones included
    return (np.asarray(indices)[..., None] == np.arange(depth)).astype(dtype)


def _cumsum(x, axis, exclusive, reverse):
    # in x's dtype; exclusive: the sums before each element (0 first), reverse: from the end
    y = np.flip(x, axis) if reverse else x
    sums = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive and sums.shape[axis]:
        before = np.moveaxis(sums, axis, 0)
        sums = np.moveaxis(np.concatenate([np.zeros_like(before[:1]), before[:-1]]), 0, axis)
    return np.flip(sums, axis) if reverse else sums


def clamped(indices, n):
    """adc's index rule in NumPy: a negative index counts from the end once, then every index
    clamps into [0, n)."""
    i = np.asarray(indices).astype(np.int64)
    return np.clip(np.where(i < 0, i + n, i), 0, max(n - 1, 0))


def _take(x, indices, axis):
    # adc's gather from an axis empty at run time gives zeros (NumPy raises)
    if not x.shape[axis]:
        return np.zeros(x.shape[:axis] + np.shape(indices) + x.shape[axis + 1:], x.dtype)
    return np.take(x, clamped(indices, x.shape[axis]), axis=axis)


def _take_along_axis(x, indices, axis):
    if not x.shape[axis]:
        return np.zeros(np.shape(indices), x.dtype)
    return np.take_along_axis(x, clamped(indices, x.shape[axis]), axis=axis)


def _scatter_add(base, indices, updates, axis):
    # np.add.at on a copy; on an axis empty at run time nothing lands
    out = np.array(base, copy=True)
    if out.shape[axis]:
        np.add.at(np.moveaxis(out, axis, 0), clamped(indices, out.shape[axis]), np.moveaxis(updates, axis, 0))
    return out


def scattered(base, indices, updates, axis):
    """adc's scatter in NumPy: on a copy of base, base[..., i, ...] = updates slice by slice in
    row-major order of the indices (of duplicates the last one stays); on an axis empty at run
    time nothing lands."""
    out = np.array(base, copy=True)
    if out.shape[axis]:
        indices = np.asarray(indices)
        rows = np.moveaxis(out, axis, 0)
        moved = np.moveaxis(updates, list(range(axis, axis + indices.ndim)), list(range(indices.ndim)))
        moved = moved.reshape((indices.size,) + rows.shape[1:])
        for k, i in enumerate(clamped(indices.ravel(), out.shape[axis])):
            rows[i] = moved[k]
    return out


def _erf(x):
    return _ERF(x).astype(np.asarray(x).dtype)


def _erfc(x):
    return _ERFC(x).astype(np.asarray(x).dtype)


def _lgamma(x):
    return _LGAMMA(x).astype(np.asarray(x).dtype)


def _per_matrix(solve, a, b):
    # solve(a, b) matrix by matrix of a stack, b a stack of vectors (rank one less than a's) or of
    # matrices, the stacking axes broadcast, as adc's solvers take them (SciPy's take one matrix)
    vector = b.ndim == a.ndim - 1
    b = b[..., None] if vector else b
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a, b = np.broadcast_to(a, lead + a.shape[-2:]), np.broadcast_to(b, lead + b.shape[-2:])
    out = np.empty(lead + (a.shape[-1], b.shape[-1]), np.result_type(a, b))
    for i in np.ndindex(lead):
        out[i] = solve(a[i], b[i])
    return out[..., 0] if vector else out


def _solve_triangular(a, b, trans, lower, unit_diagonal):
    return _per_matrix(lambda a, b: scipy.linalg.solve_triangular(a, b, trans, lower, unit_diagonal, check_finite=False),
                       a, b)


def _cho_solve(l, b):
    return _per_matrix(lambda l, b: scipy.linalg.cho_solve((l, True), b, check_finite=False), l, b)


def _lu_factor(a):
    # SciPy's lu_factor matrix by matrix, pivots as adc's i64
    lu, piv = np.empty_like(a), np.empty(a.shape[:-1], np.int64)
    for i in np.ndindex(a.shape[:-2]):
        lu[i], piv[i] = scipy.linalg.lu_factor(a[i], check_finite=False)
    return lu, piv


def _lu_solve(lu, piv, b):
    # b's stacking axes those of lu (the generator draws no broadcast here)
    out = np.empty(b.shape, np.result_type(lu, b))
    for i in np.ndindex(lu.shape[:-2]):
        out[i] = scipy.linalg.lu_solve((lu[i], piv[i]), b[i], check_finite=False)
    return out


def _lstsq(a, b):
    return _per_matrix(lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0], a, b)


RUNTIME = {"np": np, "_sigmoid": _sigmoid, "_softplus": _softplus, "_relu": _relu, "_elu": _elu,
           "_sum": _sum, "_prod": _prod, "_mean": _mean, "_max": _max, "_min": _min, "_norm": _norm,
           "_logsumexp": _logsumexp, "_softmax": _softmax, "_log_softmax": _log_softmax,
           "_cast": _cast, "_erf": _erf, "_erfc": _erfc, "_lgamma": _lgamma, "_argmax": _argmax, "_argmin": _argmin, "_one_hot": _one_hot,
           "_cumsum": _cumsum, "_take": _take, "_take_along_axis": _take_along_axis, "_scatter_add": _scatter_add, "_scatter": scattered,
           "_solve_triangular": _solve_triangular, "_cho_solve": _cho_solve, "_lstsq": _lstsq,
           "_lu_factor": _lu_factor, "_lu_solve": _lu_solve, "pi": np.pi, "e": np.e}


class Twin:
    """The twin's kernel `main` as a callable returning a tuple of arrays."""

    def __init__(self, source: str, main: str):
        self._recorded: list | None = None
        self._replay = None
        # a branch's decision is fixed as a stop_gradient operand is (`frozen_at`)
        namespace = {**RUNTIME, "_sg": self._stop_gradient, "_taken": self._stop_gradient}
        exec(compile(source, "<twin>", "exec"), namespace)
        self._main = namespace[main]

    def __call__(self, *args) -> tuple[np.ndarray, ...]:
        with np.errstate(all="ignore"), warnings.catch_warnings():     # inf and nan are values, as in adc
            warnings.simplefilter("ignore", RuntimeWarning)           # the mean of nothing is nan
            out = self._main(*args)
        return tuple(np.asarray(v) for v in (out if isinstance(out, tuple) else (out,)))

    def frozen_at(self, args) -> Callable[[list], tuple[np.ndarray, ...]]:
        """The twin with every stop_gradient operand and every branch decision fixed at its value
        for `args`: what reverse mode differentiates, so what finite differences must move."""
        self._recorded = []
        try:
            self(*args)
            values = self._recorded
        finally:
            self._recorded = None

        def frozen(moved) -> tuple[np.ndarray, ...]:
            self._replay = iter(values)
            try:
                return self(*moved)
            finally:
                self._replay = None
        return frozen

    def _stop_gradient(self, x):
        if self._replay is not None:
            return next(self._replay)
        if self._recorded is not None:
            self._recorded.append(x)
        return x
