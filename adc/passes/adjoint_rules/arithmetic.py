"""The VJP rules of arithmetic: neg, add, sub, mul, div, mod, pow, maximum, minimum, select, convert.

Part of the VJP rule table (adc/passes/adjoint_rules/__init__.py gathers the families' tables).
Binary rules give both operands their cotangent; ties and branches send it to one side:

    %0 = mul %x, %y : f64[N]      ct of %0 = %ct    ==>    %1 = mul %ct, %y : f64[N]     (ct of %x)
                                                            %2 = mul %ct, %x : f64[N]     (ct of %y)
"""
from __future__ import annotations

from adc.ir.builder import Builder, full
from adc.ir.core import Value
from adc.passes.adjoint_rules.rule import AdjointRule

adjoint_rules: dict[str, AdjointRule] = {}


def neg_adjoint(b, op, cts):
    # d(-x) = -ct
    return (b.op("neg", cts[0]),)


adjoint_rules["neg"] = neg_adjoint


def add_adjoint(b, op, cts):
    # d(x+y) = ct, ct
    return (cts[0], cts[0])


adjoint_rules["add"] = add_adjoint


def sub_adjoint(b, op, cts):
    # d(x-y) = ct, -ct
    return (cts[0], b.op("neg", cts[0]))


adjoint_rules["sub"] = sub_adjoint


def mul_adjoint(b, op, cts):
    # d(x*y) = ct*y, ct*x
    x, y = op.operands
    return (b.op("mul", cts[0], y), b.op("mul", cts[0], x))


adjoint_rules["mul"] = mul_adjoint


def div_adjoint(b, op, cts):
    # d(x/y) = ct/y, -(ct/y)*(x/y)
    quotient = b.op("div", cts[0], op.operands[1])
    return (quotient, b.op("neg", b.op("mul", quotient, op.result)))


adjoint_rules["div"] = div_adjoint


def mod_adjoint(b, op, cts):
    # x % y = x - y * (x // y), the quotient piecewise constant: d(x % y) = ct, -ct * (x // y)
    # (as TensorFlow's FloorMod)
    (ct,), (x, y) = cts, op.operands
    return (ct, b.op("neg", b.op("mul", ct, b.op("floor_div", x, y))))


adjoint_rules["mod"] = mod_adjoint


def pow_adjoint(b, op, cts):
    # d(x**p) = ct*p*x**(p-1), ct*y*log(x) where x > 0 else 0 (log of a safe argument, so no nan leaks)
    (ct,), (x, p), y = cts, op.operands, op.result
    one, zero = full(b, 1.0, x.type), full(b, 0.0, x.type)
    dx = b.op("mul", ct, b.op("mul", p, b.op("pow", x, b.op("sub", p, one))))
    positive = b.op("gt", x, zero)
    log_x = b.op("log", b.op("select", positive, x, one))
    dp = b.op("select", positive, b.op("mul", b.op("mul", ct, y), log_x), zero)
    return (dx, dp)


adjoint_rules["pow"] = pow_adjoint


def _select_by(b: Builder, cond: Value, ct: Value) -> tuple[Value, Value]:
    """ct where cond, else 0; and the complement."""
    zero = full(b, 0.0, ct.type)
    return (b.op("select", cond, ct, zero), b.op("select", cond, zero, ct))


def maximum_adjoint(b, op, cts):
    # d max(x, y) = ct to x where x >= y, else to y: a tie goes to x, as TensorFlow's Maximum
    # (so clip(x, lo, hi) passes its gradient at the bounds, as tf.clip_by_value)
    return _select_by(b, b.op("ge", *op.operands), cts[0])


adjoint_rules["maximum"] = maximum_adjoint


def minimum_adjoint(b, op, cts):
    # d min(x, y) = ct to x where x <= y, else to y: a tie goes to x, as TensorFlow's Minimum
    # (so elu'(0) = 1 through expm1(min(x, 0)), as tf.nn.elu)
    return _select_by(b, b.op("le", *op.operands), cts[0])


adjoint_rules["minimum"] = minimum_adjoint


def select_adjoint(b, op, cts):
    # d select(c, x, y) = none, ct where c, ct where not c
    cond = op.operands[0]
    return (None,) + _select_by(b, cond, cts[0])


adjoint_rules["select"] = select_adjoint


def convert_adjoint(b, op, cts):
    # d convert(x) = ct converted back, between float dtypes; integers get none
    x = op.operands[0]
    if not (x.type.dtype.is_float and op.result.type.dtype.is_float):
        return (None,)
    return (b.op("convert", cts[0], dtype=x.type.dtype),)


adjoint_rules["convert"] = convert_adjoint
