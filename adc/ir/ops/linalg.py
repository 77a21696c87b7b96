"""Linear algebra: the factorizations and solves that carry derivative rules of their own
(JAX's linalg design: few primitives, the rest composed from them in the frontend).

Both ops work on the last two axes and are stacked over the leading ones. Each reads only the
triangle it is told to (LAPACK's convention): `cholesky` the lower one, `triangular_solve` the
`lower` or upper one, without the diagonal when `unit_diagonal`. A factorization that fails
(a matrix not positive definite, or holding a NaN) gives a matrix of NaN, as JAX does: a kernel
cannot raise halfway. The references below are the interpreter's, in NumPy alone.

    %0 = cholesky %a : f64[B,N,N]
    %1 = triangular_solve %0, %b {lower = true, trans = false, unit_diagonal = false} : f64[B,N,K]
"""
from __future__ import annotations

import numpy as np

from adc.ir.ops.record import define, example, require
from adc.ir.types import TensorType


def square_matrices(t: TensorType) -> None:
    """The type rule's check of float square matrices [..., N, N] (shared with adc/ir/ops/lu.py)."""
    require(t.dtype.is_float, f"expected a float matrix, got {t}")
    require(t.rank >= 2 and t.shape[-1] == t.shape[-2], f"expected square matrices [..., N, N], got {t}")


def _cholesky_rule(types, attrs, funcs):
    (a,) = types
    square_matrices(a)
    return (a,)


def cholesky_reference(a: np.ndarray) -> np.ndarray:
    """The lower factor of each matrix of `a` from its lower triangle; NaN where it is not positive definite."""
    out = np.empty_like(a)
    for at in np.ndindex(a.shape[:-2]):
        lower = np.tril(a[at])
        try:
            out[at] = np.linalg.cholesky(lower + np.tril(lower, -1).T)
        except np.linalg.LinAlgError:
            out[at] = np.nan
    return out


define("cholesky", "the lower Cholesky factor L (L @ Lᵀ = a) of each matrix of `a`, read from its lower "
       "triangle; a matrix that is not positive definite gives NaN",
       example("%a: f64[B,N,N]", "  %0 = cholesky %a : f64[B,N,N]\n  return %0", "f64[B,N,N]"),
       _cholesky_rule, 1, traits=("materializes", "stacked_matrices"), reference=cholesky_reference,
       triangular=((0, "lower"),))


def _triangular_solve_rule(types, attrs, funcs):
    a, b = types
    square_matrices(a)
    require(all(isinstance(attrs[k], bool) for k in ("lower", "trans", "unit_diagonal")),
            "`lower`, `trans` and `unit_diagonal` must be true or false")
    require(b.dtype == a.dtype and b.rank == a.rank, f"expected right-hand sides [..., N, K] of {a}, got {b}")
    require(b.shape[:-2] == a.shape[:-2], f"batch dimensions differ: {a} and {b}")
    require(b.shape[-2] == a.shape[-1], f"expected {a.shape[-1]} rows of right-hand sides, got {b}")
    return (b,)


def triangular_solve_reference(a: np.ndarray, b: np.ndarray, lower: bool, trans: bool,
                               unit_diagonal: bool) -> np.ndarray:
    """x with op(t) @ x = b, t the `lower` (or upper) triangle of `a` (unit diagonal if told), op the
    transpose if `trans`: substitution row by row, a zero pivot giving inf or NaN as division does."""
    n = a.shape[-1]
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        t = t * (1 - np.eye(n, dtype=a.dtype)) + np.eye(n, dtype=a.dtype)
    if trans:
        t, lower = np.swapaxes(t, -1, -2), not lower
    x = np.zeros_like(b)
    with np.errstate(all="ignore"):
        for i in range(n) if lower else reversed(range(n)):
            rest = b[..., i, :] - np.sum(t[..., i, :, None] * x, axis=-2)
            x[..., i, :] = rest / t[..., i, i, None]
    return x


define("triangular_solve", "x with op(a) @ x = b for each matrix of `a`: a triangular, read from its `lower` "
       "(or upper) triangle, its diagonal taken as ones if `unit_diagonal`; op(a) = aᵀ if `trans`",
       example("%a: f64[N,N], %b: f64[N,K]",
               "  %0 = triangular_solve %a, %b {lower = true, trans = false, unit_diagonal = false} : f64[N,K]"
               "\n  return %0", "f64[N,K]"),
       _triangular_solve_rule, 2, ("lower", "trans", "unit_diagonal"), traits=("materializes", "stacked_matrices"),
       linear=(1,), buffered=(0,))
