"""The elementwise builtins: the primitive functions, compositions of them, and dtype conversions.

Part of the builtins (`adc/frontend/builtins/__init__.py` gathers the families' tables).
Operands broadcast to one shape and literals take the tensors' dtype (`Scope.elementwise`);
a function of a literal alone stays weak like the literal. A composition that is smooth
where its pieces are kinked lets one comparison pick the side of every piece, so that at the
seam all of it is one side's analytic formula and its derivatives of every order are its own
(softplus; docs/autodiff.md):

    relu(x)        %0 = constant {dtype = f32, value = 0.0} : f32
                   %1 = broadcast %0 {dims = [], shape = [N]} : f32[N]
                   %2 = le %x, %1 : bool[N]
                   %3 = select %2, %1, %x : f32[N]
"""
from __future__ import annotations

from typing import Callable

from adc.frontend.arguments import Args, Builtin, registrar
from adc.frontend.scope import Deferred, Scope, typed
from adc.ir.core import Value
from adc.ir.ops import OPS
from adc.ir.types import DType

builtin_rules: dict[str, Builtin] = {}
builtin = registrar(builtin_rules)


def _weak_unary(expand: Callable[[Scope, Value], Value]):
    def unary_expand(cx: Scope, a: Args) -> Value | Deferred:
        # of a literal or a dimension, the result is weak like a literal: sin(1.0) in an f64
        # expression is f64, f32 where nothing decides
        if isinstance(a["x"], Value):
            return expand(cx, a.tensor("x"))
        return typed(cx, None, lambda dtype: expand(cx, a.tensor("x", dtype)))
    return Builtin(("x",), {}, unary_expand)


def _primitive(op: str) -> Callable[[Scope, Value], Value]:
    return lambda cx, x: cx.op(op, x)


def _binary(op: str, first: str, second: str) -> Builtin:
    """The builtin `op(first, second)`: that elementwise op, with broadcasting and weak literals."""
    def binary_expand(cx: Scope, a: Args) -> Value | Deferred:
        return cx.elementwise(op, a[first], a[second])
    return Builtin((first, second), {}, binary_expand)


# the builtins that are ops, as their records name them: sin(x), ..., atan2(y, x), pow(x, y) (x ** y),
# minimum and maximum (which propagate nan)
for _name, _opdef in OPS.items():
    if _opdef.builtin is not None:
        builtin_rules[_opdef.builtin] = (_weak_unary(_primitive(_name)) if _opdef.arity == 1
                                         else _binary(_name, *_opdef.builtin_params))


def _cosine_side(cx: Scope, x: Value) -> Value:
    """sqrt((1 - x)(1 + x)) = sqrt(1 - x*x), without the cancellation of 1 - x*x near |x| = 1."""
    return cx.op("sqrt", cx.elementwise("mul", cx.elementwise("sub", 1, x), cx.elementwise("add", 1, x)))


# the inverse trigonometric functions are angles of points, through the one atan2 primitive:
# atan x = atan2(x, 1), asin x = atan2(x, sqrt(1 - x*x)), acos x = atan2(sqrt(1 - x*x), x); nan
# outside [-1, 1] (the square root's), and their derivatives fall out of atan2's and sqrt's
builtin_rules["atan"] = _weak_unary(lambda cx, x: cx.elementwise("atan2", x, 1))
builtin_rules["asin"] = _weak_unary(lambda cx, x: cx.op("atan2", x, _cosine_side(cx, x)))
builtin_rules["acos"] = _weak_unary(lambda cx, x: cx.op("atan2", _cosine_side(cx, x), x))


@builtin("relu", "x")
def relu_expand(cx, a):
    # relu(x) = x <= 0 ? 0 : x: relu'(0) = 0, as tf.nn.relu (maximum's gradient gives ties to x),
    # and NaN stays NaN
    x = a.tensor("x")
    return cx.select(cx.elementwise("le", x, 0), 0, x)


@builtin("elu", "x")
def elu_expand(cx, a):
    # elu(x) = x > 0 ? x : expm1(minimum(x, 0)); the minimum keeps the unselected branch finite
    x = a.tensor("x")
    return cx.select(cx.elementwise("gt", x, 0), x, cx.op("expm1", cx.elementwise("minimum", x, 0)))


@builtin("softplus", "x")
def softplus_expand(cx, a):
    # softplus(x) = log1p(exp(x)) for x <= 0, x + log1p(exp(-x)) above, which never overflows. One
    # comparison picks the side of every piece (not maximum(x, 0) + log1p(exp(-|x|)), whose kinks
    # at 0 meet from different sides), so at x = 0 all of it is log1p(exp(x)), analytic there, and
    # every derivative is softplus's own: 1/2, 1/4, ...
    x = a.tensor("x")
    above = cx.elementwise("gt", x, 0)
    tail = cx.op("log1p", cx.op("exp", cx.select(above, cx.op("neg", x), x)))
    return cx.op("add", cx.select(above, x, 0), tail)


@builtin("square", "x")
def square_expand(cx, a):
    # square(x) = x * x
    x = a.tensor("x")
    return cx.op("mul", x, x)


@builtin("reciprocal", "x")
def reciprocal_expand(cx, a):
    # reciprocal(x) = 1 / x (floats: NumPy's integer reciprocal truncates)
    return cx.elementwise("div", 1, a.float_tensor("x"))


@builtin("isnan", "x")
def isnan_expand(cx, a):
    # isnan(x) = x != x, the one value unequal to itself
    x = a.float_tensor("x")
    return cx.op("ne", x, x)


@builtin("isinf", "x")
def isinf_expand(cx, a):
    # isinf(x) = |x| == inf
    return cx.elementwise("eq", cx.op("abs", a.float_tensor("x")), float("inf"))


@builtin("isfinite", "x")
def isfinite_expand(cx, a):
    # isfinite(x) = |x| < inf, false for nan (an ordered comparison)
    return cx.elementwise("lt", cx.op("abs", a.float_tensor("x")), float("inf"))


@builtin("where", "cond", "a", "b")
def where_expand(cx, a):
    return cx.select(a["cond"], a["a"], a["b"])


@builtin("clip", "x", "lo", "hi")
def clip_expand(cx, a):
    # clip(x, lo, hi) = minimum(maximum(x, lo), hi)
    return cx.elementwise("minimum", cx.elementwise("maximum", a.tensor("x"), a["lo"]), a["hi"])


def _cast(dtype: DType):
    def cast_expand(cx: Scope, a: Args) -> Value:
        x = a.tensor("x", dtype)
        return x if x.type.dtype == dtype else cx.op("convert", x, dtype=dtype)
    return cast_expand


for _dtype in (DType.f32, DType.f64, DType.i32, DType.i64):
    builtin_rules[_dtype.value] = Builtin(("x",), {}, _cast(_dtype))
