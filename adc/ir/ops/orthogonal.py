"""The orthogonal factorizations: `qr`, `eigh` and `svd`, each an op of several results with
derivative rules of its own (JAX's linalg design; `lstsq`, `eigvalsh` and `svdvals` are
compositions in the frontend).

All work on the last two axes and are stacked over the leading ones, in NumPy's reduced forms
and conventions. `qr` and `svd` take tall matrices [..., M, N] with M >= N (the builtins
transpose wide ones whose sizes are known; a wide matrix under symbolic sizes gives NaN);
`eigh` reads the lower triangle of a square matrix (NumPy's UPLO='L'). Eigenvalues come in
ascending order, singular values in descending order. A matrix holding a NaN gives results of
NaN, as JAX does: a kernel cannot raise halfway. The references are the interpreter's, NumPy's
LAPACK routines, whose signs may differ from the compiled code's (each column's sign is free).

    %q, %r = qr %a : f64[B,M,N], f64[B,N,N]
    %w, %v = eigh %s : f64[B,N], f64[B,N,N]
    %u, %s, %vh = svd %a : f64[B,M,N], f64[B,N], f64[B,N,N]
"""
from __future__ import annotations

import numpy as np

from adc.ir.ops.record import define, example, require
from adc.ir.types import TensorType


def _tall(t: TensorType) -> None:
    require(t.dtype.is_float, f"expected a float matrix, got {t}")
    require(t.rank >= 2, f"expected matrices [..., M, N], got {t}")
    m, n = t.shape[-2:]
    require(not (isinstance(m, int) and isinstance(n, int) and m < n),
            f"expected tall matrices [..., M, N] with M >= N, got {t}")


def _qr_rule(types, attrs, funcs):
    (a,) = types
    _tall(a)
    return a, TensorType(a.dtype, a.shape[:-2] + (a.shape[-1], a.shape[-1]))


def _per_matrix(a: np.ndarray, shapes, factor) -> tuple[np.ndarray, ...]:
    """`factor` of each matrix of `a` into results of the given trailing shapes; NaN where it fails."""
    lead = a.shape[:-2]
    outs = tuple(np.full(lead + s, np.nan, a.dtype) for s in shapes)
    for at in np.ndindex(lead):
        if a.shape[-2] < a.shape[-1] or not np.isfinite(a[at]).all():
            continue
        for out, part in zip(outs, factor(a[at])):
            out[at] = part
    return outs


def qr_reference(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NumPy's reduced QR of each tall matrix of `a`."""
    n = a.shape[-1]
    return _per_matrix(a, [a.shape[-2:], (n, n)], lambda m: np.linalg.qr(m, mode="reduced"))


define("qr", "the reduced QR factorization of each tall matrix of `a` (M >= N): q [M, N] with orthonormal "
       "columns, r [N, N] upper triangular, q @ r = a (LAPACK's signs: r's diagonal may be negative)",
       example("%a: f64[B,M,N]", "  %0, %1 = qr %a : f64[B,M,N], f64[B,N,N]\n  return %0, %1",
               "(f64[B,M,N], f64[B,N,N])"),
       _qr_rule, 1, traits=("materializes", "stacked_matrices"), reference=qr_reference, triangular=((1, "upper"),))


def _eigh_rule(types, attrs, funcs):
    (a,) = types
    require(a.dtype.is_float, f"expected a float matrix, got {a}")
    require(a.rank >= 2 and a.shape[-1] == a.shape[-2], f"expected square matrices [..., N, N], got {a}")
    return TensorType(a.dtype, a.shape[:-1]), a


def eigh_reference(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NumPy's eigh of each matrix of `a` from its lower triangle: eigenvalues ascending, eigenvectors."""
    n = a.shape[-1]
    return _per_matrix(a, [(n,), (n, n)], lambda m: np.linalg.eigh(m, UPLO="L"))


define("eigh", "the eigenvalues w (ascending) and orthonormal eigenvectors v (columns, a @ v = v * w) of each "
       "symmetric matrix of `a`, read from its lower triangle",
       example("%a: f64[B,N,N]", "  %0, %1 = eigh %a : f64[B,N], f64[B,N,N]\n  return %0, %1",
               "(f64[B,N], f64[B,N,N])"),
       _eigh_rule, 1, traits=("materializes", "stacked_matrices"), reference=eigh_reference)


def _svd_rule(types, attrs, funcs):
    (a,) = types
    _tall(a)
    n = a.shape[-1]
    return a, TensorType(a.dtype, a.shape[:-2] + (n,)), TensorType(a.dtype, a.shape[:-2] + (n, n))


def svd_reference(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NumPy's reduced SVD of each tall matrix of `a`: u, singular values descending, vh."""
    n = a.shape[-1]
    return _per_matrix(a, [a.shape[-2:], (n,), (n, n)], lambda m: np.linalg.svd(m, full_matrices=False))


define("svd", "the reduced singular value decomposition of each tall matrix of `a` (M >= N): u [M, N] and "
       "vh [N, N] with orthonormal columns and rows, singular values s descending, (u * s) @ vh = a",
       example("%a: f64[B,M,N]", "  %0, %1, %2 = svd %a : f64[B,M,N], f64[B,N], f64[B,N,N]\n  return %0, %1, %2",
               "(f64[B,M,N], f64[B,N], f64[B,N,N])"),
       _svd_rule, 1, traits=("materializes", "stacked_matrices"), reference=svd_reference)
