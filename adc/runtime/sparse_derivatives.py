"""Sparse Jacobians and Hessians of a compiled kernel: its pattern detected from its IR, colored,
the seeds pushed through one batched JVP (or pulled through one batched VJP), decompressed.

    jac = adc.jacobian(m.residual, wrt="x", sparse=True)
    J = jac(x, p)                   # scipy.sparse CSR (result size × x size); (data, indices, indptr) without SciPy
    jac.sparsity, jac.colors        # the pattern of the last call's sizes, and its seeds
    jac.values(x, p, out=vals)      # the nonzeros in the pattern's order, into a preallocated array
    h = adc.hessian(m.loss, wrt="x", sparse=True)     # star-colored, compressed Hessian-vector products

The pattern (adc/passes/sparsity) is built for the sizes of the first call and the values of
its integer arguments, and kept in the kernel's cache (`kernel.derived`) under their shapes and
a digest of those values: a call with other sizes or other integer values builds its own, never a
stale one. Per pattern: a column coloring and a row coloring; forward mode (one batched JVP of
the kernel, adc/runtime/derivatives.py `batched_tangents`) when the columns need no more colors
than the rows, else reverse (`batched_derivative`); `mode` forces one. A Hessian is the Jacobian
of the gradient kernel, its pattern symmetrized and star-colored, read by symmetric decompression.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from adc.ir.types import evaluate_dim
from adc.passes.sparsity import Pattern, jacobian_patterns
from adc.passes.sparsity.coloring import column_coloring, row_coloring, star_coloring
from adc.passes.sparsity.compression import forward_index, reverse_index, seeds, symmetric_index
from adc.passes.sparsity.patterns import union
from adc.runtime.derivatives import batched_derivative, batched_tangents
from adc.runtime.tensor import Tensor


def kernel_patterns(kernel, args, wrt: int) -> tuple[Pattern, ...]:
    """Per result of `kernel`, its pattern in parameter `wrt` at the sizes and integer values of
    `args`, built once per (wrt, shapes, digest of the integer values)."""
    arrays = [np.asarray(a) for a in args]
    digest = hashlib.sha256()
    for a, t in zip(arrays, kernel.signature.param_types):
        digest.update(repr(a.shape).encode())
        if not t.dtype.is_float:
            digest.update(np.ascontiguousarray(a, t.dtype.numpy).tobytes())
    return kernel.derived.get("sparsity", (wrt, digest.hexdigest()), lambda: jacobian_patterns(
        kernel.gradient_source.parsed_ir(), kernel.signature.name, arrays, wrt))


def as_matrix(pattern: Pattern, data: np.ndarray | None = None):
    """A scipy.sparse CSR matrix of the pattern (booleans, or `data`); without SciPy, the pattern's
    (indptr, indices, shape), or the values' (data, indices, indptr)."""
    try:
        from scipy import sparse     # optional: the `sparse` extra
    except ImportError:
        if data is None:
            return pattern.indptr, pattern.indices, (pattern.rows, pattern.columns)
        return data, pattern.indices, pattern.indptr
    values = np.ones(pattern.nnz, bool) if data is None else data
    return sparse.csr_matrix((values, pattern.indices, pattern.indptr), shape=(pattern.rows, pattern.columns))


@dataclass(frozen=True)
class Plan:
    """What one pattern costs to fill: the seeds (as a Tensor [colors, ...]), whether they go
    forward, and where each nonzero lies in the flat compressed products."""

    pattern: Pattern
    colors: int
    forward: bool
    seeds: Tensor
    index: np.ndarray


def plan(pattern: Pattern, mode: str, symmetric: bool, wrt, result) -> Plan:
    """The coloring of `pattern` for `mode` ("auto", "forward", "reverse"; a symmetric pattern
    is star-colored, forward), and its seeds and decompression index; `wrt` and `result` are
    the (shape, dtype) of the values the seeds stand for, forward and reverse."""
    if symmetric:
        colors = star_coloring(pattern)
        return Plan(pattern, _count(colors), True, _seeds(colors, *wrt), symmetric_index(pattern, colors))
    by_columns = column_coloring(pattern) if mode != "reverse" else None
    by_rows = row_coloring(pattern) if mode != "forward" else None
    if by_rows is None or (by_columns is not None and _count(by_columns) <= _count(by_rows)):
        return Plan(pattern, _count(by_columns), True, _seeds(by_columns, *wrt), forward_index(pattern, by_columns))
    return Plan(pattern, _count(by_rows), False, _seeds(by_rows, *result), reverse_index(pattern, by_rows))


def _count(colors: np.ndarray) -> int:
    return int(colors.max()) + 1 if len(colors) else 0


def _seeds(colors: np.ndarray, shape: tuple, dtype) -> Tensor:
    return Tensor._wrap(seeds(colors, dtype).reshape((_count(colors), *shape)))


def decompressed(the_plan: Plan, compressed, out: np.ndarray | None = None) -> np.ndarray:
    """The nonzeros of the plan's pattern gathered from the products of its seeds (None: no path
    from the seeded value, an empty pattern), into `out` when given."""
    flat = np.zeros(0) if compressed is None else np.ascontiguousarray(compressed).reshape(-1)
    if out is None:
        return flat[the_plan.index]
    if out.shape != the_plan.index.shape or out.dtype != flat.dtype:
        raise ValueError(f"values: out must be a {flat.dtype} array of shape {the_plan.index.shape}, got "
                         f"{out.dtype} {out.shape}")
    return np.take(flat, the_plan.index, out=out)


class SparseJacobian:
    """The sparse Jacobian of a kernel's one float result w.r.t. its float parameter `wrt` (or,
    `symmetric`, the Hessian of the kernel whose gradient kernel `kernel` is): call it like the
    kernel. See the module docstring."""

    def __init__(self, kernel, wrt: int, mode: str = "auto", symmetric: bool = False):
        self.kernel, self.wrt, self.mode, self.symmetric = kernel, wrt, mode, symmetric
        self._last: Plan | None = None

    def __call__(self, *args):
        values = self.values(*args)
        return as_matrix(self._last.pattern, values)

    def values(self, *args, out: np.ndarray | None = None) -> np.ndarray:
        """The nonzeros in the pattern's (CSR) order, written into `out` when given (of the
        pattern's number of nonzeros and the result's dtype)."""
        the_plan = self._plan(args)
        return decompressed(the_plan, self._compressed(the_plan, args), out)

    @property
    def sparsity(self):
        """The pattern of the last call (scipy.sparse boolean CSR, or (indptr, indices, shape))."""
        return as_matrix(self._called().pattern)

    @property
    def colors(self) -> int:
        """The seeds the last call pushed (or pulled): its number of colors."""
        return self._called().colors

    def _called(self) -> Plan:
        if self._last is None:
            raise ValueError(f"the sparse derivative of {self.kernel.signature.name} has no pattern yet: the "
                             f"pattern is built for the sizes of its first call; call it first")
        return self._last

    def _plan(self, args) -> Plan:
        sig = self.kernel.signature
        env = self.kernel.bind_shapes([np.shape(a) for a in args])
        result_shape = tuple(evaluate_dim(d, env) for d in sig.result_types[0].shape)
        (pattern,) = kernel_patterns(self.kernel, args, self.wrt)
        if self.symmetric:
            pattern = union([pattern, pattern.transpose()])
        key = (self.wrt, self.mode, self.symmetric, pattern.indptr.tobytes(), pattern.indices.tobytes())
        self._last = self.kernel.derived.get("sparse_plan", key, lambda: plan(
            pattern, self.mode, self.symmetric, (np.shape(args[self.wrt]), sig.param_types[self.wrt].dtype.numpy),
            (result_shape, sig.result_types[0].dtype.numpy)))
        return self._last

    def _compressed(self, the_plan: Plan, args):
        """The products of the plan's seeds: [colors, *result] forward, [colors, *x] reverse."""
        derivative = (batched_tangents if the_plan.forward else batched_derivative)(self.kernel, (self.wrt,))
        if not derivative.wrt:      # no path from wrt to the result: an empty pattern, nothing to fill
            return None
        if not derivative.needs_call:       # the result is wrt (or its cotangent the result's)
            return the_plan.seeds
        out = derivative.kernel(*args, the_plan.seeds)
        return out[0] if type(out) is tuple else out
