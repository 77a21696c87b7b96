"""The ops with no derivative: piecewise constant ones, constants and stop_gradient.

Part of the VJP rule table (adc/passes/adjoint_rules/__init__.py gathers the families' tables).
Their rule gives every operand no cotangent (None), so the pass adds nothing there:

    %0 = floor %x : f64[N]        ct of %0 = %ct    ==>    none for %x
"""
from __future__ import annotations

from adc.passes.adjoint_rules.rule import AdjointRule

adjoint_rules: dict[str, AdjointRule] = {}


NON_DIFFERENTIABLE = ("sign", "round", "floor", "floor_div", "lt", "le", "gt", "ge", "eq", "ne",
                      "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
                      "stop_gradient", "constant", "iota", "dim")


def zero_adjoint(b, op, cts):
    # piecewise constant, a constant, or stop_gradient: no cotangent for any operand
    return (None,) * len(op.operands)


for _name in NON_DIFFERENTIABLE:
    adjoint_rules[_name] = zero_adjoint
