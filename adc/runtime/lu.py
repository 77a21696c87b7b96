"""The eager LU family of `adc.linalg`: lu_factor, lu_solve, solve, inv, det, slogdet on Tensors.

Each is a kernel call per signature written with the language's builtin of the same name
(adc/runtime/stdlib.py), recorded on tapes as every eager op is. Inside a kernel an exactly
singular matrix divides by its zero pivot (docs/language.md, "Linear algebra"); here, as in
NumPy, `solve` and `inv` raise numpy.linalg.LinAlgError("Singular matrix") instead — their
kernels also return the sign of det(a), 0 exactly then — and `lu_factor` warns as SciPy's does:

    adc.linalg.inv(a)    # eager_inv(a: f64[D0, N, N]) -> (f64[D0, N, N], f64[D0]):
                         #     sign, logdet = slogdet(a)
                         #     return inv(a), sign
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

from adc.runtime import stdlib
from adc.runtime.linalg import check_matrices, solve_kernel
from adc.runtime.ops import operands
from adc.runtime.stdlib import definition, tensor_type
from adc.runtime.tensor import Tensor, constant

SIGN = ("sign, logdet = slogdet(a)",)      # the sign of det(a), 0 for an exactly singular matrix


class SlogdetResult(NamedTuple):
    """NumPy's result of slogdet."""

    sign: Tensor
    logabsdet: Tensor


def _of_matrices(op: str, a, result: str, body: str, setup: tuple[str, ...] = ()):
    """The kernel of one stack of square matrices `a` returning `body`; `result` is its type with X
    for the matrices' type and S for their stacking axes (a scalar per matrix)."""
    (a,) = operands(op, (a,))
    check_matrices(op, a)

    def source():
        stack = [f"D{i}" for i in range(a.ndim - 2)]
        types = {"X": tensor_type(a.dtype, stack + ["N", "N"]), "S": tensor_type(a.dtype, stack),
                 "P": tensor_type(np.dtype(np.int64), stack + ["N"])}
        return definition(f"eager_{op}", [("a", types["X"])], "".join(types.get(c, c) for c in result), body, setup)

    return stdlib.kernel((op, a.dtype, a.ndim), source)(a)


def _raise_if_singular(sign: Tensor) -> None:
    if (sign.numpy() == 0).any():
        raise np.linalg.LinAlgError("Singular matrix")


def lu_factor(a):
    """(lu, piv) of each matrix of `a`, scipy.linalg.lu_factor's: P a = L U with L (unit diagonal)
    below the diagonal of lu and U on and above it, row i interchanged with row piv[i] in order.
    An exactly singular matrix warns, as SciPy's does."""
    lu, piv = _of_matrices("lu_factor", a, "(X, P)", "lu, piv", ("lu, piv = lu_factor(a)",))
    zeros = np.flatnonzero((np.diagonal(lu.numpy(), axis1=-2, axis2=-1) == 0).reshape(-1, lu.shape[-1]).any(axis=0))
    if zeros.size:
        warnings.warn(f"Diagonal number {zeros[0] + 1} is exactly zero. Singular matrix.", RuntimeWarning,
                      stacklevel=2)
    return lu, piv


def lu_solve(lu_and_piv, b, trans=0):
    """x with a x = b from `(lu, piv) = lu_factor(a)` (scipy.linalg.lu_solve; `trans` 0 only): b
    vectors when its rank is one less than lu's, else matrices."""
    if trans not in (0, "N"):
        raise NotImplementedError("adc.linalg.lu_solve: only trans=0 (a x = b)")
    lu, piv = lu_and_piv
    pivots = piv if isinstance(piv, Tensor) else constant(np.asarray(piv, np.int64), np.int64)
    if pivots.dtype != np.int64 or pivots.shape != tuple(np.shape(lu)[:-1]):
        raise ValueError(f"adc.linalg.lu_solve: expected int64 pivots of shape {tuple(np.shape(lu)[:-1])}, "
                         f"got {pivots.dtype} {pivots.shape}")
    return solve_kernel("lu_solve", lu, b, "lu_solve(a, piv, b)", (), pivots=pivots)


def solve(a, b):
    """x with a x = b (np.linalg.solve, NumPy 2's rule: b one vector when 1-D, else a stack of
    matrices); LinAlgError("Singular matrix") for an exactly singular a."""
    x, sign = solve_kernel("solve", a, b, "solve(a, b)", (), vectors=np.ndim(b) == 1, setup=SIGN, checked=True)
    _raise_if_singular(sign)
    return x


def inv(a):
    """The inverse of each matrix of `a` (np.linalg.inv); LinAlgError("Singular matrix") for an
    exactly singular one."""
    x, sign = _of_matrices("inv", a, "(X, S)", "inv(a), sign", SIGN)
    _raise_if_singular(sign)
    return x


def det(a):
    """The determinant of each matrix of `a` (np.linalg.det): 0 for a singular one."""
    return _of_matrices("det", a, "S", "det(a)")


def slogdet(a) -> SlogdetResult:
    """(sign, log|det|) of each matrix of `a` (np.linalg.slogdet): (0, -inf) for a singular one."""
    return SlogdetResult(*_of_matrices("slogdet", a, "(S, S)", "sign, logdet", SIGN))
