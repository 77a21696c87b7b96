"""The ops with no derivative: piecewise constant ones, constants, stop_gradient, and the ops
giving indices (argmax, argmin) — those whose records say `non_differentiable` or `index_result`.

Part of the VJP rule table (adc/passes/adjoint_rules/__init__.py gathers the families' tables).
Their rule gives every operand no cotangent (None), so the pass adds nothing there:

    %0 = floor %x : f64[N]        ct of %0 = %ct    ==>    none for %x
"""
from __future__ import annotations

from adc.ir.ops import with_trait
from adc.passes.adjoint_rules.rule import AdjointRule

adjoint_rules: dict[str, AdjointRule] = {}


NON_DIFFERENTIABLE = with_trait("non_differentiable") | with_trait("index_result")


def zero_adjoint(b, op, cts):
    # piecewise constant, a constant, stop_gradient or indices: no cotangent for any operand
    return (None,) * len(op.operands)


for _name in NON_DIFFERENTIABLE:
    adjoint_rules[_name] = zero_adjoint
