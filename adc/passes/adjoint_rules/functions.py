"""The VJP rules of the elementwise functions: exp, log, the trigonometric, hyperbolic and special ones.

Part of the VJP rule table (adc/passes/adjoint_rules/__init__.py gathers the families' tables).
Each is ct times the function's derivative, written with the function's result where that is
cheaper (exp, tanh, sqrt) and finite where the math allows (asinh, hypot at the origin):

    %0 = sin %x : f64[N]          ct of %0 = %ct    ==>    %1 = cos %x : f64[N]
                                                            %2 = mul %ct, %1 : f64[N]     (ct of %x)
"""
from __future__ import annotations

import math

from adc.errors import CompileError
from adc.ir.builder import Builder, full
from adc.ir.core import Value
from adc.ir.ops import OPS
from adc.passes.adjoint_rules.rule import AdjointRule

adjoint_rules: dict[str, AdjointRule] = {}


def _scaled(b: Builder, ct: Value, value: float, x: Value) -> Value:
    """ct * value * x."""
    return b.op("mul", ct, b.op("mul", full(b, value, x.type), x))


def cos_adjoint(b, op, cts):
    # d cos x = -ct*sin x
    return (b.op("neg", b.op("mul", cts[0], b.op("sin", op.operands[0]))),)


adjoint_rules["cos"] = cos_adjoint


def tan_adjoint(b, op, cts):
    # d tan x = ct*(1 + y*y)
    y = op.result
    return (b.op("mul", cts[0], b.op("add", full(b, 1.0, y.type), b.op("mul", y, y))),)


adjoint_rules["tan"] = tan_adjoint


def exp_adjoint(b, op, cts):
    # d exp x = ct*y
    return (b.op("mul", cts[0], op.result),)


adjoint_rules["exp"] = exp_adjoint


def log_adjoint(b, op, cts):
    # d log x = ct/x
    return (b.op("div", cts[0], op.operands[0]),)


adjoint_rules["log"] = log_adjoint


def log1p_adjoint(b, op, cts):
    # d log1p x = ct/(1 + x)
    x = op.operands[0]
    return (b.op("div", cts[0], b.op("add", full(b, 1.0, x.type), x)),)


adjoint_rules["log1p"] = log1p_adjoint


def expm1_adjoint(b, op, cts):
    # d expm1 x = ct*(y + 1)
    y = op.result
    return (b.op("mul", cts[0], b.op("add", y, full(b, 1.0, y.type))),)


adjoint_rules["expm1"] = expm1_adjoint


def sqrt_adjoint(b, op, cts):
    # d sqrt x = ct/(2y)
    y = op.result
    return (b.op("div", cts[0], b.op("mul", full(b, 2.0, y.type), y)),)


adjoint_rules["sqrt"] = sqrt_adjoint


def rsqrt_adjoint(b, op, cts):
    # d rsqrt x = -0.5*ct*y**3
    y = op.result
    return (_scaled(b, cts[0], -0.5, b.op("mul", y, b.op("mul", y, y))),)


adjoint_rules["rsqrt"] = rsqrt_adjoint


def tanh_adjoint(b, op, cts):
    # d tanh x = ct*(1 - y*y)
    y = op.result
    return (b.op("mul", cts[0], b.op("sub", full(b, 1.0, y.type), b.op("mul", y, y))),)


adjoint_rules["tanh"] = tanh_adjoint


def sigmoid_adjoint(b, op, cts):
    # d sigmoid x = ct*y*(1 - y)
    y = op.result
    return (b.op("mul", cts[0], b.op("mul", y, b.op("sub", full(b, 1.0, y.type), y))),)


adjoint_rules["sigmoid"] = sigmoid_adjoint


def abs_adjoint(b, op, cts):
    # d|x| = ct*sign(x) (0 at x = 0)
    return (b.op("mul", cts[0], b.op("sign", op.operands[0])),)


adjoint_rules["abs"] = abs_adjoint


def _log_base_adjoint(ln_base: float) -> AdjointRule:
    def log_base_adjoint(b, op, cts):
        # d log_b x = ct/(x ln b)
        x = op.operands[0]
        return (b.op("div", cts[0], b.op("mul", x, full(b, ln_base, x.type))),)
    return log_base_adjoint


adjoint_rules["log2"] = _log_base_adjoint(math.log(2.0))
adjoint_rules["log10"] = _log_base_adjoint(math.log(10.0))


def exp2_adjoint(b, op, cts):
    # d 2**x = ct*ln2*y
    return (_scaled(b, cts[0], math.log(2.0), op.result),)


adjoint_rules["exp2"] = exp2_adjoint


def cbrt_adjoint(b, op, cts):
    # d cbrt x = ct/(3y*y)
    y = op.result
    return (b.op("div", cts[0], b.op("mul", full(b, 3.0, y.type), b.op("mul", y, y))),)


adjoint_rules["cbrt"] = cbrt_adjoint


def _times(derivative: str) -> AdjointRule:
    """The rule d f x = ct * derivative(x), `derivative` another op."""
    def times_adjoint(b, op, cts):
        return (b.op("mul", cts[0], b.op(derivative, op.operands[0])),)
    return times_adjoint


# f whose record names f' as an op (trigamma has none: lgamma is differentiable twice, digamma once)
for _name, _opdef in OPS.items():
    if _opdef.derivative is not None:
        adjoint_rules[_name] = _times(_opdef.derivative)


def asinh_adjoint(b, op, cts):
    # d asinh x = ct/sqrt(x*x + 1) = ct/hypot(x, 1), finite for every finite x
    x = op.operands[0]
    return (b.op("div", cts[0], b.op("hypot", x, full(b, 1.0, x.type))),)


adjoint_rules["asinh"] = asinh_adjoint


def acosh_adjoint(b, op, cts):
    # d acosh x = ct/sqrt((x - 1)(x + 1))
    x = op.operands[0]
    one = full(b, 1.0, x.type)
    return (b.op("div", cts[0], b.op("sqrt", b.op("mul", b.op("sub", x, one), b.op("add", x, one)))),)


adjoint_rules["acosh"] = acosh_adjoint


def atanh_adjoint(b, op, cts):
    # d atanh x = ct/((1 - x)(1 + x))
    x = op.operands[0]
    one = full(b, 1.0, x.type)
    return (b.op("div", cts[0], b.op("mul", b.op("sub", one, x), b.op("add", one, x))),)


adjoint_rules["atanh"] = atanh_adjoint


def _gaussian(b: Builder, ct: Value, x: Value, scale: float) -> Value:
    """ct*scale*exp(-x*x)."""
    return _scaled(b, ct, scale, b.op("exp", b.op("neg", b.op("mul", x, x))))


def erf_adjoint(b, op, cts):
    # d erf x = ct*2/sqrt(pi)*exp(-x*x)
    return (_gaussian(b, cts[0], op.operands[0], 2.0 / math.sqrt(math.pi)),)


adjoint_rules["erf"] = erf_adjoint


def erfc_adjoint(b, op, cts):
    # d erfc x = -ct*2/sqrt(pi)*exp(-x*x)
    return (_gaussian(b, cts[0], op.operands[0], -2.0 / math.sqrt(math.pi)),)


adjoint_rules["erfc"] = erfc_adjoint


def trigamma_adjoint(b, op, cts):
    raise CompileError("trigamma has no derivative in adc: lgamma is differentiable twice, digamma once", op.loc)


adjoint_rules["trigamma"] = trigamma_adjoint


def atan2_adjoint(b, op, cts):
    # d atan2(y, x) = ct*x/(x*x + y*y), -ct*y/(x*x + y*y)
    (ct,), (y, x) = cts, op.operands
    scaled = b.op("div", ct, b.op("add", b.op("mul", x, x), b.op("mul", y, y)))
    return (b.op("mul", scaled, x), b.op("neg", b.op("mul", scaled, y)))


adjoint_rules["atan2"] = atan2_adjoint


def hypot_adjoint(b, op, cts):
    # d hypot(x, y) = ct*x/h, ct*y/h; 0, 0 at x = y = 0, the tip of a cone with no derivative, where
    # hypot(x, 0) = |x| takes abs's convention abs'(0) = 0 (and the safe divisor keeps 0/0 out)
    (ct,), (x, y), h = cts, op.operands, op.result
    zero = full(b, 0.0, h.type)
    at_origin = b.op("eq", h, zero)
    scaled = b.op("select", at_origin, zero, b.op("div", ct, b.op("select", at_origin, full(b, 1.0, h.type), h)))
    return (b.op("mul", scaled, x), b.op("mul", scaled, y))


adjoint_rules["hypot"] = hypot_adjoint


def logaddexp_adjoint(b, op, cts):
    # d logaddexp(x, y) = ct*e^(x - r), ct*e^(y - r), r the result: the softmax of (x, y), each in [0, 1]
    x, y = op.operands
    return tuple(b.op("mul", cts[0], b.op("exp", b.op("sub", v, op.result))) for v in (x, y))


adjoint_rules["logaddexp"] = logaddexp_adjoint
