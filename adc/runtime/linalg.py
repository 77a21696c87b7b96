"""The eager linear algebra, `adc.linalg`: cholesky, solve_triangular and cho_solve on Tensors.

Each is a kernel call per signature (adc/runtime/stdlib.py writes its source with the language's
builtin of the same name), recorded on tapes as every eager op is. Where a kernel gives NaN for
a factorization that fails (docs/language.md, "Linear algebra"), these check and raise
numpy.linalg.LinAlgError, as NumPy and SciPy do:

    adc.linalg.cholesky(a)    # eager_cholesky(a: f64[D0, N, N]) -> f64[D0, N, N]: return cholesky(a)
"""
from __future__ import annotations

import numpy as np

from adc.runtime import stdlib
from adc.runtime.ops import broadcast_dims, check_broadcast, operands, size_one_axes
from adc.runtime.stdlib import definition, tensor_type

TRANS = {0: 0, 1: 1, 2: 1, "N": 0, "T": 1, "C": 1}     # SciPy's `trans` (C: the conjugate transpose, for reals T)


def check_matrices(op: str, a) -> None:
    if a.dtype.kind != "f":
        raise TypeError(f"adc.linalg.{op} expects a floating tensor, got {a.dtype}")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise np.linalg.LinAlgError(f"adc.linalg.{op}: expected square matrices [..., N, N], got shape {a.shape}")


def cholesky(a):
    """The lower Cholesky factor of each matrix of `a`, read from its lower triangle (NumPy's)."""
    (a,) = operands("cholesky", (a,))
    check_matrices("cholesky", a)
    key = ("cholesky", a.dtype, a.ndim)

    def source():
        x = tensor_type(a.dtype, [f"D{i}" for i in range(a.ndim - 2)] + ["N", "N"])
        return definition("eager_cholesky", [("a", x)], x, "cholesky(a)")

    factor = stdlib.kernel(key, source)(a)
    if np.isnan(factor.numpy()).any():
        raise np.linalg.LinAlgError("Matrix is not positive definite")
    return factor


def solve_kernel(op: str, a, b, body: str, key: tuple, vectors: bool | None = None, pivots=None,
                 setup: tuple[str, ...] = (), checked: bool = False):
    """The kernel `body` of matrices a (with their `pivots`, named piv) and right-hand sides b,
    their stacking axes broadcast: b vectors if `vectors` (by default when its rank is one less than
    a's), else matrices. With `checked`, the kernel also returns `sign`, which `setup` computes
    (the sign of det(a), 0 for an exactly singular matrix), and the call returns (x, sign)."""
    a, b = operands(op, (a, b))
    check_matrices(op, a)
    vectors = b.ndim == a.ndim - 1 if vectors is None else vectors
    rows = b.shape[-1] if vectors else b.shape[-2] if b.ndim >= 2 else None
    if rows != a.shape[-1]:
        raise ValueError(f"adc.linalg.{op}: right-hand sides of shape {b.shape} for matrices of shape {a.shape}")
    batches = [a.shape[:-2], b.shape[:-1] if vectors else b.shape[:-2]]
    check_broadcast(op, batches)
    patterns = [size_one_axes(s) for s in batches]

    def source():
        (ba, bb), out = broadcast_dims(patterns, "B")
        core = ["N"] if vectors else ["N", "K"]
        params = [("a", tensor_type(a.dtype, ba + ["N", "N"])), ("b", tensor_type(b.dtype, bb + core))]
        params += [("piv", tensor_type(np.dtype(np.int64), ba + ["N"]))] if pivots is not None else []
        result, returned = tensor_type(a.dtype, out + core), body
        if checked:
            result, returned = f"({result}, {tensor_type(a.dtype, ba)})", f"{body}, sign"
        return definition(f"eager_{op}", params, result, returned, setup)

    kernel = stdlib.kernel((op, a.dtype, b.dtype, vectors, checked, *patterns, *key), source)
    return kernel(a, b) if pivots is None else kernel(a, b, pivots)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False):
    """x with a x = b (trans 1, 2, 'T' or 'C': aᵀ x = b), a read from its `lower` (or upper)
    triangle, its diagonal taken as ones if `unit_diagonal` (scipy.linalg.solve_triangular)."""
    if trans not in TRANS:
        raise ValueError(f"adc.linalg.solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    flags = (TRANS[trans], bool(lower), bool(unit_diagonal))
    a, b = operands("solve_triangular", (a, b))
    check_matrices("solve_triangular", a)
    if not unit_diagonal:
        diagonal = np.diagonal(a.numpy(), axis1=-2, axis2=-1)
        zeros = np.flatnonzero((diagonal == 0).any(axis=tuple(range(diagonal.ndim - 1))))
        if zeros.size:
            raise np.linalg.LinAlgError(f"singular matrix: resolution failed at diagonal {zeros[0]}")
    body = f"solve_triangular(a, b, trans={flags[0]}, lower={flags[1]}, unit_diagonal={flags[2]})"
    return solve_kernel("solve_triangular", a, b, body, flags)


def cho_solve(c_and_lower, b):
    """x with a x = b from a's Cholesky factor: `(c, lower)` as SciPy's cho_solve takes it, or the
    lower factor alone (adc's cho_solve(l, b))."""
    c, lower = c_and_lower if isinstance(c_and_lower, tuple) else (c_and_lower, True)
    body = "cho_solve(a, b)" if lower else "solve_triangular(a, solve_triangular(a, b, trans=1))"
    return solve_kernel("cho_solve", c, b, body, (bool(lower),))
