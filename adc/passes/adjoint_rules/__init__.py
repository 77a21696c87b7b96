"""The VJP rule of every op: the table the adjoint pass (adc/passes/adjoint.py) runs.

A rule turns the cotangents of an op's results into cotangents of its operands,
emitting ordinary IR with the builder, so the adjoint of an adjoint is a second
derivative. Every op a rule emits has a rule here too; every op of
`adc.ir.ops.OPS` has a rule or is listed in `NON_DIFFERENTIABLE`. Rules have the
signature `rule.AdjointRule`. Each family of ops keeps its rows in a module of this
package, and this table gathers them; a new op is a row in its family's table:

    no_contribution.py   piecewise constant ops, constants, stop_gradient
    arithmetic.py        neg add sub mul div mod pow maximum minimum select convert
    functions.py         exp log sin ... erf lgamma atan2 hypot
    shape.py             broadcast reshape transpose slice slice_add concat pad
    indexing.py          gather scatter_add scatter
    reductions.py        reduce_* argmax argmin cumsum cumprod matmul
    linalg.py            cholesky triangular_solve
    lu.py                lu_factor
    (adc/passes/orthogonal_rules.py: qr eigh svd, with their JVP rules)
    calls.py             call custom_gradient extern_call
    (adc/passes/adjoint_control_flow.py: if for while scan)

    %0 = sin %x : f64[N]          ct of %0 = %ct    ==>    %1 = cos %x : f64[N]
                                                            %2 = mul %ct, %1 : f64[N]     (ct of %x)
"""
from __future__ import annotations

from adc.passes.adjoint_control_flow import for_adjoint, if_adjoint, scan_adjoint, while_adjoint
from adc.passes.adjoint_rules import (arithmetic, calls, functions, indexing, linalg, lu, no_contribution,
                                     reductions, shape)
from adc.passes.adjoint_rules.rule import AdjointRule
from adc.passes.orthogonal_rules import adjoint_rules as orthogonal_adjoint_rules

adjoint_rules: dict[str, AdjointRule] = {
    **no_contribution.adjoint_rules, **arithmetic.adjoint_rules, **functions.adjoint_rules, **shape.adjoint_rules,
    **indexing.adjoint_rules, **reductions.adjoint_rules, **linalg.adjoint_rules, **lu.adjoint_rules,
    **orthogonal_adjoint_rules,
    **calls.adjoint_rules,
    "if": if_adjoint, "for": for_adjoint, "while": while_adjoint, "scan": scan_adjoint,
}
