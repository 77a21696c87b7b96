"""The eager orthogonal factorizations of `adc.linalg`: qr, lstsq, eigh, eigvalsh, svd, with
NumPy's names, arguments and results (np.linalg.* on Tensors dispatch here).

Each is a kernel call per signature written with the language's builtin (the kernels of the
factorizations of several results unpack them), recorded on tapes as every eager op is. Where
a kernel gives NaN (a matrix holding NaN) they raise numpy.linalg.LinAlgError as NumPy does:

    adc.linalg.eigh(a)    # def eager_eigh(a: f64[D0, N, N]) -> (f64[D0, N], f64[D0, N, N]):
                          #     w, v = eigh(a)
                          #     return w, v
"""
from __future__ import annotations

import numpy as np

from adc.runtime import stdlib
from adc.runtime.ops import operands, transpose
from adc.runtime.stdlib import tensor_type


def _matrices(op: str, a, square: bool = False) -> None:
    if a.dtype.kind != "f":
        raise TypeError(f"adc.linalg.{op} expects a floating tensor, got {a.dtype}")
    if a.ndim < 2 or (square and a.shape[-1] != a.shape[-2]):
        shape = "square matrices [..., N, N]" if square else "matrices [..., M, N]"
        raise np.linalg.LinAlgError(f"adc.linalg.{op}: expected {shape}, got shape {a.shape}")


def _factor(op: str, a, results: list[tuple[str, list[str]]], call: str, square: bool = False):
    """The kernel `r0, r1, ... = call(a)` of stacked (`square`) matrices a, its results of the given
    core dims; a wide matrix's sizes are static (the builtins factor it through a tall one)."""
    lead = [f"D{i}" for i in range(a.ndim - 2)]
    wide = a.shape[-2] < a.shape[-1]
    sizes = {"M": str(a.shape[-2]), "N": str(a.shape[-1]), "K": str(min(a.shape[-2:]))} if wide else {"K": "N"}

    def dims(core: list[str]) -> list[str]:
        return lead + [sizes.get(d, d) for d in core]

    def source():
        names = [f"r{k}" for k in range(len(results))]
        types = [tensor_type(a.dtype, dims(core)) for _, core in results]
        param = tensor_type(a.dtype, dims(["N", "N"] if square else ["M", "N"]))
        if len(names) == 1:
            return f"eager_{op}", f"def eager_{op}(a: {param}) -> {types[0]}:\n    return {call}(a)\n"
        return f"eager_{op}", (f"def eager_{op}(a: {param}) -> ({', '.join(types)}):\n"
                               f"    {', '.join(names)} = {call}(a)\n    return {', '.join(names)}\n")
    key = (op, a.dtype, a.ndim, a.shape[-2:] if wide else None)
    outs = stdlib.kernel(key, source)(a)
    outs = outs if isinstance(outs, tuple) else (outs,)
    if any(np.isnan(t.numpy()).any() for t in outs):
        raise np.linalg.LinAlgError(f"adc.linalg.{op}: the matrix holds NaN or inf")
    return outs


def qr(a, mode: str = "reduced"):
    """(q, r) with q @ r = a, q's columns orthonormal, r upper triangular (np.linalg.qr, mode='reduced')."""
    if mode != "reduced":
        raise ValueError(f"adc.linalg.qr computes mode='reduced' only, got mode={mode!r}")
    (a,) = operands("qr", (a,))
    _matrices("qr", a)
    return _factor("qr", a, [("q", ["M", "K"]), ("r", ["K", "N"])], "qr")


def _lower_of(a, uplo: str):
    if uplo not in ("L", "U"):
        raise ValueError(f"UPLO must be 'L' or 'U', got {uplo!r}")      # U: the lower triangle of aᵀ
    (a,) = operands("eigh", (a,))
    _matrices("eigh", a, square=True)
    return a if uplo == "L" else transpose(a, list(range(a.ndim - 2)) + [a.ndim - 1, a.ndim - 2])


def eigh(a, UPLO: str = "L"):   # noqa: N803  (NumPy's name)
    """(w, v): eigenvalues ascending and eigenvectors (columns) of symmetric a, read from the
    `UPLO` triangle (np.linalg.eigh)."""
    return _factor("eigh", _lower_of(a, UPLO), [("w", ["N"]), ("v", ["N", "N"])], "eigh", square=True)


def eigvalsh(a, UPLO: str = "L"):   # noqa: N803
    """The eigenvalues of symmetric a, ascending (np.linalg.eigvalsh)."""
    return _factor("eigvalsh", _lower_of(a, UPLO), [("w", ["N"])], "eigvalsh", square=True)[0]


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False):
    """(u, s, vh) with (u * s) @ vh = a, s descending (np.linalg.svd); the reduced form only, so
    `full_matrices` must be False unless a is square. compute_uv=False gives s."""
    (a,) = operands("svd", (a,))
    _matrices("svd", a)
    if not compute_uv:
        return _factor("svdvals", a, [("s", ["K"])], "svdvals")[0]
    if full_matrices and a.shape[-1] != a.shape[-2]:
        raise ValueError("adc.linalg.svd computes the reduced form: pass full_matrices=False")
    return _factor("svd", a, [("u", ["M", "K"]), ("s", ["K"]), ("vh", ["K", "N"])], "svd")


def lstsq(a, b, rcond=None):
    """NumPy's (x, residuals, rank, s) for a [M, N] of full column rank (M >= N): x from a QR
    factorization, the residuals' sums of squares per column (empty when M == N), the rank and
    singular values from svd. A rank-deficient a raises LinAlgError (NumPy would return the
    least-norm solution)."""
    a, b = operands("lstsq", (a, b))
    if a.ndim != 2 or b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise np.linalg.LinAlgError(f"adc.linalg.lstsq: expected a [M, N] and b [M] or [M, K], "
                                    f"got {a.shape} and {b.shape}")
    m, n = a.shape
    s = svd(a, full_matrices=False, compute_uv=False)
    values = s.numpy()
    cutoff = (np.finfo(a.dtype).eps * max(m, n) if rcond is None else rcond) * (values[0] if n else 0.0)
    rank = int(np.sum(values > cutoff))
    if rank < n:
        raise np.linalg.LinAlgError(f"adc.linalg.lstsq needs a of full column rank, got rank {rank} < {n}")
    core = ["M"] + (["K"] if b.ndim == 2 else [])

    def source():
        out = tensor_type(a.dtype, ["N"] + core[1:])
        sums = tensor_type(a.dtype, core[1:] or ["1"])
        residual = "sum(d * d, axis=0)" if b.ndim == 2 else "reshape(sum(d * d), [1])"
        return "eager_lstsq", (f"def eager_lstsq(a: {tensor_type(a.dtype, ['M', 'N'])}, b: {tensor_type(b.dtype, core)})"
                               f" -> ({out}, {sums}):\n    x = lstsq(a, b)\n    d = a @ x - b\n"
                               f"    return x, {residual}\n")
    x, residuals = stdlib.kernel(("lstsq", a.dtype, b.dtype, b.ndim), source)(a, b)
    return x, (residuals if m > n else np.empty((0,), a.dtype)), rank, s
