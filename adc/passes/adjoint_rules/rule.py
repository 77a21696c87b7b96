"""What an adjoint rule is: the signature every row of the VJP table has, documented once.

The adjoint pass (adc/passes/adjoint.py) calls the rule of each op, last op first, with the
cotangents of the op's results; the rule emits the IR of its operands' cotangents:

    op = `%0 = mul %x, %y : f64[N]`, cts = (%ct,)    ==>    %1 = mul %ct, %y : f64[N]
                                                         %2 = mul %ct, %x : f64[N]
                                                         returns (%1, %2)
"""
from __future__ import annotations

from typing import Callable

from adc.ir.builder import Builder
from adc.ir.core import Op, Value

# adjoint_rules[op_name](b, op, cts) -> one cotangent (or None) per operand of `op`
#   b:   the builder of the VJP function, stamped with op.loc by the pass
#   op:  the primal op; its operands and results are values of the VJP function
#   cts: the cotangents of op's results; None is a symbolic zero (not all are None)
# A returned None is "no contribution": the pass adds nothing for that operand.
AdjointRule = Callable[[Builder, Op, tuple["Value | None", ...]], tuple["Value | None", ...]]
