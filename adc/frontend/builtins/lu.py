"""The builtins of the LU factorization and what is composed from it: lu_factor, lu_solve, solve,
inv, det, slogdet (NumPy's and SciPy's names and conventions, stacked over leading axes).

Part of the builtins (`adc/frontend/builtins/__init__.py` gathers the families' tables). Only
`lu_factor` is an op with derivative rules; the rest are its results permuted by a gather,
two triangular solves, and sums and products of the factor's diagonal, so every derivative
flows through those ops' rules and a factor computed once serves the backward pass:

    solve(a, b)      %0, %1 = lu_factor %a : f64[N,N], i64[N]
    (b: f64[N, K])   %2 = lu_pivots_to_permutation %1 : i64[N]
                     ... gather of b's rows at %2 (take_along_axis) ...
                     %7 = triangular_solve %0, %6 {lower = true, trans = false, unit_diagonal = true} : f64[N,K]
                     %8 = triangular_solve %0, %7 {lower = false, trans = false, unit_diagonal = false} : f64[N,K]
"""
from __future__ import annotations

from adc.frontend.arguments import Args, Builtin, registrar
from adc.frontend.builtins.gathers import take_along
from adc.frontend.builtins.linalg import square_matrices
from adc.frontend.scope import Results, Scope
from adc.ir.core import Value
from adc.ir.types import I64, TensorType

builtin_rules: dict[str, Builtin] = {}
builtin = registrar(builtin_rules)


def _factor(cx: Scope, a: Value) -> tuple[Value, Value, Value]:
    """(lu, pivots, permutation) of matrices `a`."""
    lu, pivots = cx.b.emit("lu_factor", a)
    return lu, pivots, cx.op("lu_pivots_to_permutation", pivots)


def _solve_factored(cx: Scope, a: Args, lu: Value, perm: Value, b: Value, vectors: bool) -> Value:
    """x with P⁻¹ L U x = b: b's rows gathered at the permutation, then L (unit diagonal) and U
    solved; b a stack of vectors [..., N] (`vectors`) or of matrices [..., N, K], the stacking axes
    of the factor and b broadcast."""
    n = lu.type.shape[-1]
    columns = cx.reshape(b, b.type.shape + (1,)) if vectors else b
    if columns.type.rank < 2 or columns.type.shape[-2] != n:
        raise a.error("b", f"expected {n} rows of right-hand sides for matrices {lu.type}, got {b.type}")
    batch = cx.broadcast_shape([TensorType(lu.type.dtype, v.type.shape[:-2]) for v in (lu, columns)])
    lu = cx.broadcast(lu, batch + (n, n))
    rows = cx.broadcast(cx.reshape(perm, perm.type.shape + (1,)), batch + (n, 1))
    permuted = take_along(cx, cx.broadcast(columns, batch + columns.type.shape[-2:]), rows, len(batch))
    y = cx.op("triangular_solve", lu, permuted, lower=True, trans=False, unit_diagonal=True)
    x = cx.op("triangular_solve", lu, y, lower=False, trans=False, unit_diagonal=False)
    return cx.reshape(x, x.type.shape[:-1]) if vectors else x


def _diagonal(cx: Scope, m: Value) -> Value:
    """The diagonal of each matrix of m, [..., N]: the off-diagonal entries selected away, then summed."""
    shape, rank = m.type.shape, m.type.rank
    rows, columns = (cx.op("iota", axis=axis, dtype=I64, shape=shape) for axis in (rank - 2, rank - 1))
    on = cx.select(cx.op("eq", rows, columns), m, cx.tensor(0.0, m.type.dtype))
    return cx.op("reduce_sum", on, axes=(rank - 1,))


def _parity(cx: Scope, pivots: Value, dtype) -> Value:
    """det(P) of the pivots' interchanges: -1 for an odd number of rows moved, else 1."""
    moved = cx.op("ne", pivots, cx.op("iota", axis=pivots.type.rank - 1, dtype=I64, shape=pivots.type.shape))
    count = cx.op("reduce_sum", cx.op("convert", moved, dtype=I64), axes=(pivots.type.rank - 1,))
    odd = cx.op("convert", cx.elementwise("mod", count, 2), dtype=dtype)
    return cx.elementwise("sub", 1.0, cx.elementwise("mul", 2.0, odd))


@builtin("lu_factor", "a")
def lu_factor_expand(cx, a):
    # (lu, piv), SciPy's: L below the diagonal (unit diagonal implied), U on and above, row i
    # interchanged with row piv[i] in order
    lu, pivots = cx.b.emit("lu_factor", square_matrices(a, "a"))
    return Results((lu, pivots))


@builtin("lu_solve", "lu", "piv", "b")
def lu_solve_expand(cx, a):
    # scipy.linalg.lu_solve((lu, piv), b): b vectors when its rank is one less than lu's
    lu = square_matrices(a, "lu")
    pivots = a.tensor("piv")
    if not pivots.type.dtype.is_int or pivots.type.shape != lu.type.shape[:-1]:
        raise a.error("piv", f"expected pivots {TensorType(I64, lu.type.shape[:-1])} of {lu.type}, got {pivots.type}")
    pivots = pivots if pivots.type.dtype is I64 else cx.op("convert", pivots, dtype=I64)
    b = a.tensor("b", lu.type.dtype)
    cx.common_dtype([lu, b])
    perm = cx.op("lu_pivots_to_permutation", pivots)
    return _solve_factored(cx, a, lu, perm, b, b.type.rank == lu.type.rank - 1)


@builtin("solve", "a", "b")
def solve_expand(cx, a):
    # np.linalg.solve (NumPy 2's rule): b is one vector when 1-D, else a stack of matrices [..., N, K]
    m = square_matrices(a, "a")
    b = a.tensor("b", m.type.dtype)
    cx.common_dtype([m, b])
    lu, _, perm = _factor(cx, m)
    return _solve_factored(cx, a, lu, perm, b, b.type.rank == 1)


@builtin("inv", "a")
def inv_expand(cx, a):
    # np.linalg.inv: the solve of every column of the identity
    m = square_matrices(a, "a")
    shape, rank = m.type.shape, m.type.rank
    rows, columns = (cx.op("iota", axis=k, dtype=I64, shape=shape) for k in (rank - 2, rank - 1))
    identity = cx.op("convert", cx.op("eq", rows, columns), dtype=m.type.dtype)
    lu, _, perm = _factor(cx, m)
    return _solve_factored(cx, a, lu, perm, identity, False)


@builtin("det", "a")
def det_expand(cx, a):
    # det(a) = det(P) · Π diag(U)
    m = square_matrices(a, "a")
    lu, pivots = cx.b.emit("lu_factor", m)
    product = cx.op("reduce_prod", _diagonal(cx, lu), axes=(m.type.rank - 2,))
    return cx.elementwise("mul", _parity(cx, pivots, m.type.dtype), product)


@builtin("slogdet", "a")
def slogdet_expand(cx, a):
    # (sign, log|det|), np.linalg.slogdet's: sign = det(P) · Π sign(diag(U)), log|det| = Σ log|diag(U)|;
    # a singular matrix gives (0, -inf)
    m = square_matrices(a, "a")
    lu, pivots = cx.b.emit("lu_factor", m)
    diagonal, axis = _diagonal(cx, lu), m.type.rank - 2
    sign = cx.elementwise("mul", _parity(cx, pivots, m.type.dtype),
                          cx.op("reduce_prod", cx.op("sign", diagonal), axes=(axis,)))
    return Results((sign, cx.op("reduce_sum", cx.op("log", cx.op("abs", diagonal)), axes=(axis,))))

