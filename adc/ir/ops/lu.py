"""The LU factorization with partial pivoting and the permutation its pivots stand for.

`lu_factor` is the primitive with derivative rules of its own (JAX's `lu`); `solve`, `inv`,
`det` and `slogdet` are composed from it in the frontend. Both ops are stacked over leading
axes. The pivots follow LAPACK's getrf and SciPy's lu_factor, counted from 0: row i was
interchanged with row piv[i], in order i = 0, 1, ... An exactly singular matrix is factored
as LAPACK does (a zero column below the diagonal is no pivot: it stays, and U gets a zero on
its diagonal), so what divides by that zero later (a solve, an inverse) gives inf or NaN, as
in JAX; a kernel cannot raise halfway.

    %0, %1 = lu_factor %a : f64[B,N,N], i64[B,N]         (L below the diagonal, unit diagonal implied; U on and above)
    %2 = lu_pivots_to_permutation %1 : i64[B,N]          (p with (P a)[i] = a[p[i]], P a = L U)
"""
from __future__ import annotations

import numpy as np

from adc.ir.ops.linalg import square_matrices
from adc.ir.ops.record import define, example, require
from adc.ir.types import I64, TensorType


def _lu_factor_rule(types, attrs, funcs):
    (a,) = types
    square_matrices(a)
    return a, TensorType(I64, a.shape[:-1])


def lu_factor_reference(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """getf2's right-looking elimination of each matrix: the first row of largest |a[i, j]| (i >= j)
    is column j's pivot; a zero column is left as it is."""
    lu, pivots = a.copy(), np.zeros(a.shape[:-1], np.int64)
    n = a.shape[-1]
    with np.errstate(all="ignore"):
        for at in np.ndindex(a.shape[:-2]):
            m = lu[at]
            for j in range(n):
                p = j + int(np.argmax(np.abs(m[j:, j])))
                pivots[at + (j,)] = p
                if m[p, j] != 0:
                    m[[j, p]] = m[[p, j]]
                    m[j + 1:, j] /= m[j, j]
                m[j + 1:, j + 1:] -= np.outer(m[j + 1:, j], m[j, j + 1:])
    return lu, pivots


define("lu_factor", "the LU factorization with partial pivoting of each matrix of `a`: P a = L U, with L "
       "(unit diagonal) below the diagonal of the first result and U on and above it, and the pivots "
       "(row i interchanged with row piv[i], in order: LAPACK's getrf, counted from 0)",
       example("%a: f64[B,N,N]", "  %0, %1 = lu_factor %a : f64[B,N,N], i64[B,N]\n  return %0",
               "f64[B,N,N]"),
       _lu_factor_rule, 1, traits=("materializes", "stacked_matrices"))


def _lu_pivots_to_permutation_rule(types, attrs, funcs):
    (pivots,) = types
    require(pivots.dtype is I64 and pivots.rank >= 1, f"expected pivots i64[..., N], got {pivots}")
    return (pivots,)


def lu_pivots_to_permutation_reference(pivots: np.ndarray) -> np.ndarray:
    """The interchanges applied in order to 0 .. N-1; a pivot out of [0, N) is clamped into it."""
    n = pivots.shape[-1]
    perm = np.broadcast_to(np.arange(n, dtype=np.int64), pivots.shape).copy()
    for at in np.ndindex(pivots.shape[:-1]):
        p = perm[at]
        for i, k in enumerate(np.clip(pivots[at], 0, n - 1)):
            p[i], p[k] = p[k], p[i]
    return perm


define("lu_pivots_to_permutation", "the permutation p of rows that the pivots of `lu_factor` stand for: "
       "(P a)[i] = a[p[i]]; pivots out of [0, N) are clamped into it",
       example("%p: i64[B,N]", "  %0 = lu_pivots_to_permutation %p : i64[B,N]\n  return %0", "i64[B,N]"),
       _lu_pivots_to_permutation_rule, 1, traits=("materializes", "stacked_matrices", "non_differentiable"),
       reference=lu_pivots_to_permutation_reference)
