"""The table of lowering rules, `lower_rules`, keyed by op name: the rows of every op family's module.

Element rules `rule(em, op, idx) -> ir.Value` compute element `idx` of `op`'s
result inside the loop of its consumer, reading operands with
`em.value_at(operand, operand_index)`. Buffer rules, for the ops in
fusion.MATERIALIZING, are `rule(em, op, dest) -> None` and fill the result
buffer `dest` from the kernel function; those of the control-flow ops, which
may have several results, and those of the factorizations of several
results (qr, eigh, svd, lu_factor) take a list of buffers, one per result.

    elementwise.py   arithmetic, comparisons, math functions, convert, constant, dim, iota
    shape.py         broadcast, reshape, transpose, slice, concat, pad
    indexing.py      gather, scatter, scatter_add, slice_add
    reductions.py    reduce_sum, reduce_max, reduce_min, reduce_prod, argmax, argmin
    scans.py         cumsum, cumprod
    matmul.py        matmul
    linalg.py        cholesky, triangular_solve
    lu.py            lu_factor, lu_pivots_to_permutation
    orthogonal.py    qr (Householder)
    spectral.py      eigh, svd (one-sided Jacobi)
    calls.py         extern_call
    control_flow.py  for, scan, while, if
"""
from __future__ import annotations

from typing import Callable

from adc.codegen.lowering.rules import (calls, control_flow, elementwise, indexing, linalg, lu, matmul, orthogonal,
                                        reductions, scans, shape, spectral)

LowerRule = Callable[..., object]
lower_rules: dict[str, LowerRule] = {
    **elementwise.lower_rules, **shape.lower_rules, **indexing.lower_rules, **reductions.lower_rules,
    **scans.lower_rules, **matmul.lower_rules, **linalg.lower_rules, **lu.lower_rules, **orthogonal.lower_rules,
    **spectral.lower_rules, **calls.lower_rules, **control_flow.lower_rules}
