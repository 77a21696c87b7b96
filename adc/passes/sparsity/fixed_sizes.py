"""A sparse derivative at the fixed sizes of its kernel's types, as `adc compile --sparse-jacobian`
and `--sparse-hessian` put it in a shared object: the pattern detected for those sizes and every
value of the integer params, its compression, the compressed function (passes/jacobian.py
`sparse_jacobian`), and the pattern and the decompression index in CSC order (CasADi's, and
what C sparse solvers take).

    fixed = fixed_sparse(module, "f", 0)        # f(x: f64[8]) -> f64[8], tridiagonal
    fixed.colptr, fixed.rowind                  # [0 2 5 8 ...], [0 1 0 1 2 1 2 3 ...]
    fixed.module[fixed.function]                # (x: f64[8], colors: i64[8], index: i64[22]) -> f64[22]

Sizes are fixed because the pattern is: detection is this analysis, run by the compiler, and a
symbolic size refuses (CompileError) rather than ship a pattern for one size as if for all.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adc.errors import CompileError
from adc.ir.core import Module
from adc.passes.jacobian import gradient, sparse_jacobian
from adc.passes.sparsity import jacobian_patterns
from adc.passes.sparsity.compression import Compression, compress
from adc.passes.sparsity.patterns import union


@dataclass(frozen=True)
class FixedSparse:
    """`module` holds `function` (the kernel's params, then the coloring's `colors` and the
    decompression `index`, which `compression` and `index` give); its result, the nonzeros of the
    Jacobian of `shape` (result size × wrt size) in CSC order: column j's at colptr[j]..colptr[j+1],
    their rows in rowind."""

    module: Module
    function: str
    shape: tuple[int, int]
    compression: Compression
    colptr: np.ndarray
    rowind: np.ndarray
    index: np.ndarray


def fixed_sparse(module: Module, name: str, param: int, hessian: bool = False, mode: str = "auto",
                 out_name: str | None = None) -> FixedSparse:
    """The sparse Jacobian of `name` w.r.t. param `param` (`hessian`: of its gradient, the pattern
    symmetrized and star-colored) at the sizes of its types, which must be fixed."""
    func = module[name]
    symbols = sorted({s for t in func.param_types for s in t.symbols})
    if symbols:
        raise CompileError(f"a sparse derivative of @{name} in a shared object needs fixed sizes, but its "
                           f"parameters' types have the symbols {', '.join(symbols)}: the pattern depends on "
                           f"them (load the module with the compiler present and call "
                           f"adc.jacobian(m.{name}, sparse=True), which detects it at the sizes of each call)",
                           func.loc)
    if hessian:
        module, grad, _ = gradient(module, name, [param])
        name, mode = grad.name, "forward"
    args = [np.zeros(tuple(t.shape), t.dtype.numpy) for t in func.param_types]
    (pattern,) = jacobian_patterns(module, name, args, param, integers_known=False)
    if hessian:
        pattern = union([pattern, pattern.transpose()])
    chosen = compress(pattern, mode, hessian)
    module, done = sparse_jacobian(module, name, param, chosen.count, pattern.nnz, chosen.forward, out_name)
    order = np.lexsort((pattern.row_ids(), pattern.indices))     # CSR -> CSC: by column, then row
    by_columns = pattern.transpose()
    return FixedSparse(module, done.name, (pattern.rows, pattern.columns), chosen, by_columns.indptr,
                       by_columns.indices, chosen.index[order])
