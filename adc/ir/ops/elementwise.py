"""Elementwise ops and the sources (constants, iota, dims): one record each.

Broadcasting is explicit: elementwise operands have identical types, and `broadcast`
(adc/ir/ops/shape.py) expands a value to a larger shape.
"""
from __future__ import annotations

import math

import numpy as np

from adc.ir.ops.record import ALL, Scalar, define, example, require, same_types
from adc.ir.types import BOOL, DType, SymDim, TensorType


# The type rules of the elementwise kinds: which dtypes the operands may have.
def _unary_rule(kinds: str):
    def rule(types, attrs, funcs):
        (t,) = types
        if kinds == "float":
            require(t.dtype.is_float, f"expected a float operand, got {t}")
        elif kinds == "bits":
            require(not t.dtype.is_float, f"expected a bool or integer operand, got {t}")
        else:
            require(t.dtype is not BOOL, f"expected a numeric operand, got {t}")
        return (t,)
    return rule


def _binary_rule(kinds: str):
    def rule(types, attrs, funcs):
        t = same_types(types)
        if kinds == "float":
            require(t.dtype.is_float, f"expected float operands, got {t}")
        elif kinds == "numeric":
            require(t.dtype is not BOOL, f"expected numeric operands, got {t}")
        elif kinds == "bits":
            require(not t.dtype.is_float, f"expected bool or integer operands, got {t}")
        elif kinds == "compare":
            return (t.with_dtype(BOOL),)
        return (t,)
    return rule


def unary(name: str, kind: str, summary: str, traits=(), **facts) -> None:
    """An elementwise op of one operand of `kind` ("float", "numeric" or "bits")."""
    operand = "bool[N]" if kind == "bits" else "f32[N]"
    define(name, f"elementwise {summary}",
           example(f"%x: {operand}", f"  %0 = {name} %x : {operand}\n  return %0", operand),
           _unary_rule(kind), 1, traits=("elementwise", "unary", *traits), dtypes=kind, **facts)


def binary(name: str, kind: str, summary: str, traits=(), **facts) -> None:
    """An elementwise op of two operands of one type, of `kind` ("float", "numeric", "bits" or
    "compare", whose result is bool)."""
    operand = "bool[N]" if kind == "bits" else "f32[N]"
    result = "bool[N]" if kind in ("compare", "bits") else "f32[N]"
    define(name, f"elementwise {summary} of two operands of one type",
           example(f"%x: {operand}, %y: {operand}", f"  %0 = {name} %x, %y : {result}\n  return %0", result),
           _binary_rule(kind), 2,
           traits=("elementwise", "binary", *(("compare",) if kind == "compare" else ()), *traits),
           dtypes="any" if kind == "compare" else kind, **facts)


def _math(function, nonfinite_at_poles: bool = False):
    """A function of Python's math module over arrays, in f64 (NumPy has none; the interpreter
    rounds to the op's dtype); lgamma is inf at its poles (C99), where math raises."""
    if nonfinite_at_poles:
        return np.vectorize(lambda v: math.inf if v <= 0 and (math.isinf(v) or v == math.floor(v))
                            else function(v), otypes=[np.float64])
    return np.vectorize(function, otypes=[np.float64])


def _vecmath(name: str, *traits: str, **facts) -> dict:
    """The facts of a float function computed by vector math and called by its builtin name."""
    return dict(traits=traits, scalar=Scalar(vecmath=name), builtin=name, **facts)


# ---------------------------------------------------------------- unary float functions
T = "transcendental"
unary("sin", "float", "sine", **_vecmath("sin", T, reference=np.sin, ufunc="sin", derivative="cos"))
unary("cos", "float", "cosine", **_vecmath("cos", T, reference=np.cos, ufunc="cos"))
unary("tan", "float", "tangent", **_vecmath("tan", T, reference=np.tan, ufunc="tan"))
unary("exp", "float", "e**x", **_vecmath("exp", T, reference=np.exp, ufunc="exp"))
unary("log", "float", "natural logarithm", **_vecmath("log", T, reference=np.log, ufunc="log"))
unary("log1p", "float", "log(1 + x), accurate near 0", **_vecmath("log1p", T, reference=np.log1p, ufunc="log1p"))
unary("expm1", "float", "exp(x) - 1, accurate near 0", **_vecmath("expm1", T, reference=np.expm1, ufunc="expm1"))
unary("sqrt", "float", "square root", **_vecmath("sqrt", reference=np.sqrt, ufunc="sqrt"))
unary("rsqrt", "float", "1 / sqrt(x)", **_vecmath("rsqrt"))
unary("tanh", "float", "hyperbolic tangent", **_vecmath("tanh", T, reference=np.tanh, ufunc="tanh"))
unary("sigmoid", "float", "1 / (1 + exp(-x))", **_vecmath("sigmoid", T))
unary("round", "float", "round half to even",
      **_vecmath("round", "non_differentiable", reference=np.rint, ufunc="rint"))
unary("floor", "float", "largest integer <= x",
      **_vecmath("floor", "non_differentiable", reference=np.floor, ufunc="floor"))
unary("log2", "float", "base-2 logarithm", **_vecmath("log2", T, reference=np.log2, ufunc="log2"))
unary("log10", "float", "base-10 logarithm", **_vecmath("log10", T, reference=np.log10, ufunc="log10"))
unary("exp2", "float", "2**x", **_vecmath("exp2", T, reference=np.exp2, ufunc="exp2"))
unary("cbrt", "float", "cube root", **_vecmath("cbrt", T, reference=np.cbrt, ufunc="cbrt"))
unary("sinh", "float", "hyperbolic sine", **_vecmath("sinh", T, reference=np.sinh, ufunc="sinh", derivative="cosh"))
unary("cosh", "float", "hyperbolic cosine",
      **_vecmath("cosh", T, reference=np.cosh, ufunc="cosh", derivative="sinh"))
unary("asinh", "float", "inverse hyperbolic sine", **_vecmath("asinh", T, reference=np.arcsinh, ufunc="arcsinh"))
unary("acosh", "float", "inverse hyperbolic cosine",
      **_vecmath("acosh", T, reference=np.arccosh, ufunc="arccosh"))
unary("atanh", "float", "inverse hyperbolic tangent",
      **_vecmath("atanh", T, reference=np.arctanh, ufunc="arctanh"))
unary("erf", "float", "error function", **_vecmath("erf", T, reference=_math(math.erf)))
unary("erfc", "float", "1 - erf(x), accurate where erf is near 1", **_vecmath("erfc", T, reference=_math(math.erfc)))
unary("lgamma", "float", "log |Gamma(x)|",
      **_vecmath("lgamma", T, reference=_math(math.lgamma, nonfinite_at_poles=True), derivative="digamma"))
unary("digamma", "float", "psi(x), the derivative of lgamma", **_vecmath("digamma", T, derivative="trigamma"))
# trigamma has no derivative (lgamma is differentiable twice, digamma once) and no builtin
unary("trigamma", "float", "psi'(x), the derivative of digamma", traits=(T,), scalar=Scalar(vecmath="trigamma"))

# ---------------------------------------------------------------- unary numeric and bitwise
unary("neg", "numeric", "-x", linear=(0,), traits=("additive",), reference=np.negative, ufunc="negative",
      scalar=Scalar(integer="neg", float="fneg"))
unary("abs", "numeric", "|x|", reference=np.abs, ufunc="absolute", builtin="abs")
unary("sign", "numeric", "-1, 0 or 1 (0 for nan stays nan)", traits=("non_differentiable",), reference=np.sign,
      ufunc="sign", builtin="sign")
unary("bitwise_not", "bits", "~x: logical not of bools, bitwise not (-x - 1) of integers",
      traits=("non_differentiable",), reference=np.invert, ufunc="invert", scalar=Scalar(integer="not_"))

# ---------------------------------------------------------------- binary
C = "commutative"
binary("add", "numeric", "x + y", traits=(C, "additive"), linear=ALL, reference=np.add, ufunc="add",
       scalar=Scalar(integer="add", float="fadd"))
binary("sub", "numeric", "x - y", traits=("additive",), linear=ALL, reference=np.subtract, ufunc="subtract",
       scalar=Scalar(integer="sub", float="fsub"))
binary("mul", "numeric", "x * y", traits=(C,), products=(0, 1), reference=np.multiply, ufunc="multiply",
       scalar=Scalar(integer="mul", float="fmul"))
# llvm.maximum/minimum propagate NaN, as np.maximum/np.minimum do (not commutative: which of -0.0
# and 0.0 they return depends on the order)
binary("minimum", "numeric", "the smaller of x and y (nan if either is nan)", reference=np.minimum,
       ufunc="minimum", builtin="minimum", scalar=Scalar(intrinsic=("smin", "minimum")))
binary("maximum", "numeric", "the larger of x and y (nan if either is nan)", reference=np.maximum,
       ufunc="maximum", builtin="maximum", scalar=Scalar(intrinsic=("smax", "maximum")))
binary("mod", "numeric", "x % y with the sign of y, as np.mod (integers: 0 where y is 0)", reference=np.mod,
       ufunc="remainder")
binary("floor_div", "numeric", "x // y, the floor of x / y, as np.floor_divide (integers: 0 where y is 0)",
       traits=("non_differentiable",), reference=np.floor_divide, ufunc="floor_divide")
# `div` is defined for floats only: integers divide with `floor_div`
binary("div", "float", "x / y", products=(0,), reference=np.divide, ufunc="divide", scalar=Scalar(float="fdiv"))
binary("pow", "float", "x ** y", traits=(T,), reference=np.power, ufunc="power", builtin="pow",
       scalar=Scalar(vecmath="pow"))
binary("atan2", "float", "the angle of the point (y, x) = (first, second operand), in [-pi, pi], as np.arctan2",
       traits=(T,), reference=np.arctan2, ufunc="arctan2", builtin="atan2", params=("y", "x"),
       scalar=Scalar(vecmath="atan2"))
binary("hypot", "float", "sqrt(x*x + y*y) without overflow or underflow", traits=(T,), reference=np.hypot,
       ufunc="hypot", builtin="hypot", scalar=Scalar(vecmath="hypot"))
binary("logaddexp", "float", "log(exp(x) + exp(y)) without overflow, as np.logaddexp", traits=(T,),
       reference=np.logaddexp, ufunc="logaddexp", builtin="logaddexp", scalar=Scalar(vecmath="logaddexp"))
# on bools these are the logical and, or, xor
binary("bitwise_and", "bits", "x & y (logical and of bools)", traits=(C, "non_differentiable"),
       reference=np.bitwise_and, ufunc="bitwise_and", scalar=Scalar(integer="and_"))
binary("bitwise_or", "bits", "x | y (logical or of bools)", traits=(C, "non_differentiable"),
       reference=np.bitwise_or, ufunc="bitwise_or", scalar=Scalar(integer="or_"))
binary("bitwise_xor", "bits", "x ^ y (logical xor of bools)", traits=(C, "non_differentiable"),
       reference=np.bitwise_xor, ufunc="bitwise_xor", scalar=Scalar(integer="xor"))
# ordered float compares are false on NaN, except `ne` (unordered), as in NumPy
binary("lt", "compare", "x < y", traits=("non_differentiable",), reference=np.less, ufunc="less",
       scalar=Scalar(predicate="<"))
binary("le", "compare", "x <= y", traits=("non_differentiable",), reference=np.less_equal, ufunc="less_equal",
       scalar=Scalar(predicate="<="))
binary("gt", "compare", "x > y", traits=("non_differentiable",), reference=np.greater, ufunc="greater",
       scalar=Scalar(predicate=">"))
binary("ge", "compare", "x >= y", traits=("non_differentiable",), reference=np.greater_equal,
       ufunc="greater_equal", scalar=Scalar(predicate=">="))
binary("eq", "compare", "x == y", traits=(C, "non_differentiable"), reference=np.equal, ufunc="equal",
       scalar=Scalar(predicate="=="))
binary("ne", "compare", "x != y", traits=(C, "non_differentiable"), reference=np.not_equal, ufunc="not_equal",
       scalar=Scalar(predicate="!="))


# ---------------------------------------------------------------- select, convert, stop_gradient

def _select_rule(types, attrs, funcs):
    cond, a, b = types
    require(cond.dtype is BOOL, f"expected a bool condition, got {cond}")
    t = same_types([a, b])
    require(cond.shape == t.shape, f"condition shape {cond} differs from operands {t}")
    return (t,)


define("select", "elementwise `c ? x : y`",
       example("%c: bool[N], %x: f32[N], %y: f32[N]", "  %0 = select %c, %x, %y : f32[N]\n  return %0", "f32[N]"),
       _select_rule, 3, traits=("elementwise",), linear=(1, 2), reference=np.where)


def _convert_rule(types, attrs, funcs):
    (t,) = types
    require(isinstance(attrs["dtype"], DType), f"`dtype` must be a dtype, got {attrs['dtype']!r}")
    return (t.with_dtype(attrs["dtype"]),)


define("convert", "elementwise conversion to `dtype` (float to int truncates toward zero)",
       example("%x: f32[N]", "  %0 = convert %x {dtype = f64} : f64[N]\n  return %0", "f64[N]"),
       _convert_rule, 1, ("dtype",), traits=("elementwise", "unary"), linear=(0,))


def _identity_rule(types, attrs, funcs):
    return (types[0],)


define("stop_gradient", "identity whose cotangent is zero",
       example("%x: f32[N]", "  %0 = stop_gradient %x : f32[N]\n  return %0", "f32[N]"),
       _identity_rule, 1, traits=("elementwise", "unary", "index_map", "non_differentiable"),
       reference=np.asarray, builtin="stop_gradient")


# ---------------------------------------------------------------- sources

def _constant_rule(types, attrs, funcs):
    value, dtype = attrs["value"], attrs["dtype"]
    require(isinstance(value, (int, float, bool)), f"expected a number, got {value!r}")
    return (TensorType(dtype),)


define("constant", "a scalar constant of `dtype`",
       example("", "  %0 = constant {dtype = f32, value = 0.5} : f32\n  return %0", "f32"),
       _constant_rule, 0, ("dtype", "value"),
       traits=("elementwise", "source", "cheap", "flat", "non_differentiable"))


def _iota_rule(types, attrs, funcs):
    shape, axis = tuple(attrs["shape"]), attrs["axis"]
    require(0 <= axis < len(shape), f"axis {axis} out of range for rank {len(shape)}")
    return (TensorType(attrs["dtype"], shape),)


define("iota", "the index along `axis` at each position of a `shape` tensor",
       example("%x: f32[N]", "  %0 = iota {axis = 0, dtype = f32, shape = [N]} : f32[N]\n  return %0", "f32[N]"),
       _iota_rule, 0, ("axis", "dtype", "shape"), traits=("source", "cheap", "non_differentiable"))


def _dim_rule(types, attrs, funcs):
    require(isinstance(attrs["value"], (int, SymDim)), f"expected a dimension, got {attrs['value']!r}")
    return (TensorType(attrs["dtype"]),)


define("dim", "the run-time value of a dimension expression, as a scalar of `dtype`",
       example("%x: f32[N]", "  %0 = dim {dtype = f32, value = N} : f32\n  return %0", "f32"),
       _dim_rule, 0, ("dtype", "value"), traits=("elementwise", "source", "cheap", "flat", "non_differentiable"))
