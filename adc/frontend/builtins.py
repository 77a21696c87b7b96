"""The builtin functions of the language, each expanded into IR primitives by one rule.

Part of elaboration (`elaborate.py` calls these rules). `builtin_rules` maps a
builtin's name to its parameters (with defaults, named as NumPy/TensorFlow name
them) and its expansion rule `<name>_expand(cx, args) -> value`, where `cx` is
the `Scope` of the kernel being built and `args` the elaborated arguments.
Compositions become several primitives; weak literals take the tensor's dtype:

    relu(x)        %0 = constant {dtype = f32, value = 0.0} : f32
                   %1 = broadcast %0 {dims = [], shape = [N]} : f32[N]
                   %2 = le %x, %1 : bool[N]
                   %3 = select %2, %1, %x : f32[N]

A composition that is smooth where its pieces are kinked lets one comparison pick the side of
every piece, so that at the seam all of it is one side's analytic formula and its derivatives
of every order are its own (softplus; docs/autodiff.md).

The first half of this file is `Scope`: literals, dtypes and NumPy broadcasting,
shared by the rules and the elaborator's operators.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from adc.errors import CompileError, Location
from adc.ir.builder import Builder
from adc.ir.core import Value
from adc.ir.ops import gathered_shape
from adc.ir.types import BOOL, F32, DType, Dim, SymDim, TensorType, num_elements


class Results(tuple):
    """The results of a call of a kernel returning a tuple: they can only be unpacked."""


@dataclass(frozen=True)
class Deferred:
    """A tensor whose dtype its context decides, f32 when none does (`zeros(shape)`, like a literal)."""

    make: Callable[[DType], Value]


def is_static(v: object) -> bool:
    """An integer known at compile time: an int literal or a dimension expression."""
    return isinstance(v, SymDim) or type(v) is int


def describe(v: object) -> str:
    if isinstance(v, Value):
        return f"tensor {v.type}"
    if isinstance(v, Results):
        return f"tuple of {len(v)} results"
    if isinstance(v, bool):
        return f"boolean {v}"
    if isinstance(v, (int, float)):
        return f"number {v}"
    kinds = {SymDim: "dimension", DType: "dtype", Deferred: "tensor"}
    if type(v) in kinds:
        return f"{kinds[type(v)]} {v}"
    return "list" if isinstance(v, list) else repr(v)


class Scope:
    """Building ops for one kernel: literals, dtype agreement and explicit broadcasting."""

    def __init__(self, b: Builder):
        self.b = b

    def error(self, message: str, loc: Location | None = None) -> CompileError:
        return CompileError(message, loc or self.b.loc)

    def op(self, name: str, *operands: Value, **attrs: Any) -> Value:
        return self.b.op(name, *operands, **attrs)

    def constant(self, value: int | float | bool, dtype: DType) -> Value:
        if dtype is BOOL and type(value) is not bool:
            raise self.error(f"cannot use {value} as a bool value")
        if dtype.is_int and isinstance(value, float) and not value.is_integer():
            raise self.error(f"cannot use {value} as an {dtype} value")
        try:
            cast = float(value) if dtype.is_float else int(value) if dtype.is_int else value
        except OverflowError:
            raise self.error(f"{value} is too large for {dtype}") from None
        if dtype.is_int and not -2 ** (8 * dtype.numpy.itemsize - 1) <= cast < 2 ** (8 * dtype.numpy.itemsize - 1):
            raise self.error(f"{value} is out of the range of {dtype}")
        return self.op("constant", dtype=dtype, value=cast)

    def tensor(self, v: object, dtype: DType | None = None) -> Value:
        """`v` as a tensor; a literal or dimension becomes a scalar of `dtype` (default f32)."""
        if isinstance(v, Value):
            return v
        if isinstance(v, (bool, int, float)):
            return self.constant(v, dtype or (BOOL if isinstance(v, bool) else F32))
        if isinstance(v, SymDim):
            return self.op("dim", dtype=dtype or F32, value=v)
        if isinstance(v, Deferred):
            return v.make(dtype or F32)
        raise self.error(f"expected a tensor or a number, got {describe(v)}")

    def common_dtype(self, values) -> DType:
        """The dtype of the tensors among `values`, which must agree; literals adapt to it."""
        tensors = [v for v in values if isinstance(v, Value)]
        for t in tensors[1:]:
            if t.type.dtype != tensors[0].type.dtype:
                raise self.error(f"dtype mismatch: {tensors[0].type} and {t.type}; convert one with "
                                 "f32(...), f64(...), i32(...) or i64(...)")
        if tensors:
            return tensors[0].type.dtype
        return BOOL if all(isinstance(v, bool) for v in values) else F32

    def broadcast_shape(self, types: list[TensorType]) -> tuple[Dim, ...]:
        """NumPy's rule: align at the right; a dimension broadcasts when it is 1 or equal."""
        shape: list[Dim] = []
        for axis in range(1, max(t.rank for t in types) + 1):
            size, source = 1, None
            for t in types:
                if t.rank < axis or t.shape[-axis] == 1:
                    continue
                if source is not None and t.shape[-axis] != size:
                    raise self.error(f"cannot broadcast {source} against {t}: dimension {size} "
                                     f"against {t.shape[-axis]}")
                size, source = t.shape[-axis], t
            shape.insert(0, size)
        return tuple(shape)

    def broadcast(self, v: Value, shape: tuple[Dim, ...]) -> Value:
        shape = tuple(shape)
        if v.type.shape == shape:
            return v
        return self.op("broadcast", v, dims=tuple(range(len(shape) - v.type.rank, len(shape))), shape=shape)

    def reshape(self, v: Value, shape) -> Value:
        shape = tuple(shape)
        return v if v.type.shape == shape else self.op("reshape", v, shape=shape)

    def transpose(self, v: Value, perm: tuple[int, ...] | None = None) -> Value:
        """`v` with result axis i taken from axis perm[i]; by default every axis reversed (NumPy's .T)."""
        perm = tuple(reversed(range(v.type.rank))) if perm is None else perm
        return v if perm == tuple(range(v.type.rank)) else self.op("transpose", v, perm=perm)

    def elementwise(self, name: str, *values: object) -> Value:
        """Op `name` on `values` after agreeing on a dtype and broadcasting to one shape."""
        dtype = self.common_dtype(values)
        tensors = [self.tensor(v, dtype) for v in values]
        shape = self.broadcast_shape([t.type for t in tensors])
        return self.op(name, *(self.broadcast(t, shape) for t in tensors))

    def select(self, cond: object, a: object, b: object) -> Value:
        dtype = self.common_dtype([a, b])
        c, x, y = self.tensor(cond, BOOL), self.tensor(a, dtype), self.tensor(b, dtype)
        if c.type.dtype is not BOOL:
            raise self.error(f"the condition must be a bool tensor (a comparison), got {c.type}")
        shape = self.broadcast_shape([c.type, x.type, y.type])
        return self.op("select", *(self.broadcast(v, shape) for v in (c, x, y)))


# ---------------------------------------------------------------- arguments


class Args:
    """The elaborated arguments of one builtin call by parameter name, with their locations."""

    def __init__(self, cx: Scope, func: str, values: dict[str, tuple[object, Location]]):
        self.cx, self.func, self.values = cx, func, values

    def __getitem__(self, key: str) -> object:
        return self.values[key][0]

    def error(self, key: str, message: str) -> CompileError:
        return CompileError(f"{self.func}(): {message}", self.values[key][1])

    def tensor(self, key: str, dtype: DType | None = None) -> Value:
        with self.cx.b.at(self.values[key][1]):
            return self.cx.tensor(self[key], dtype)

    def tensors(self, key: str) -> list[Value]:
        items = self[key]
        if not isinstance(items, list) or not items:
            raise self.error(key, f"'{key}' must be a non-empty list of tensors, got {describe(items)}")
        with self.cx.b.at(self.values[key][1]):
            dtype = self.cx.common_dtype(items)
            return [self.cx.tensor(v, dtype) for v in items]

    def static_int(self, key: str, value: object = None) -> int:
        value = self[key] if value is None else value
        if type(value) is not int:
            raise self.error(key, f"'{key}' must be a static integer, got {describe(value)}")
        return value

    def dim(self, key: str, value: object = None) -> Dim:
        value = self[key] if value is None else value
        if not is_static(value):
            raise self.error(key, f"'{key}' needs sizes that are integers or dimension symbols, "
                                  f"got {describe(value)}")
        if isinstance(value, int) and value < 0:
            raise self.error(key, f"a size cannot be negative, got {value}")
        return value

    def shape(self, key: str) -> tuple[Dim, ...]:
        value = self[key]
        return tuple(self.dim(key, d) for d in value) if isinstance(value, list) else (self.dim(key),)

    def axis(self, key: str, rank: int, value: object = None) -> int:
        axis = self.static_int(key, value)
        if not -rank <= axis < rank:
            raise self.error(key, f"axis {axis} is out of range for rank {rank}")
        return axis % rank

    def axes(self, key: str, rank: int) -> tuple[int, ...]:
        """None: every axis; an int or a list of ints, negative ones counting from the end."""
        value = self[key]
        if value is None:
            return tuple(range(rank))
        axes = [self.axis(key, rank, a) for a in (value if isinstance(value, list) else [value])]
        if len(set(axes)) != len(axes):
            raise self.error(key, f"repeated axis in {value}")
        return tuple(sorted(axes))

    def flag(self, key: str) -> bool:
        if type(self[key]) is not bool:
            raise self.error(key, f"'{key}' must be True or False, got {describe(self[key])}")
        return self[key]

    def dtype(self, key: str) -> DType | None:
        if self[key] is not None and not isinstance(self[key], DType):
            raise self.error(key, f"'{key}' must be one of f32, f64, i32, i64, bool, got {describe(self[key])}")
        return self[key]


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Builtin:
    params: tuple[str, ...]
    defaults: dict[str, object]
    expand: Callable[[Scope, Args], object]


builtin_rules: dict[str, Builtin] = {}


def builtin(name: str, *params: str, **defaults: object):
    """Register `<name>_expand` with its positional parameters and its keyword parameters' defaults."""
    def register(expand):
        builtin_rules[name] = Builtin(params + tuple(defaults), defaults, expand)
        return expand
    return register


PRIMITIVE_UNARY = ("sin", "cos", "tan", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "abs", "sign",
                   "tanh", "sigmoid", "round", "floor", "stop_gradient", "log2", "log10", "exp2", "cbrt",
                   "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "lgamma", "digamma")


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


for _op in PRIMITIVE_UNARY:
    builtin_rules[_op] = _weak_unary(_primitive(_op))


def _cosine_side(cx: Scope, x: Value) -> Value:
    """sqrt((1 - x)(1 + x)) = sqrt(1 - x*x), without the cancellation of 1 - x*x near |x| = 1."""
    return cx.op("sqrt", cx.elementwise("mul", cx.elementwise("sub", 1, x), cx.elementwise("add", 1, x)))


# the inverse trigonometric functions are angles of points, through the one atan2 primitive:
# atan x = atan2(x, 1), asin x = atan2(x, sqrt(1 - x*x)), acos x = atan2(sqrt(1 - x*x), x); nan
# outside [-1, 1] (the square root's), and their derivatives fall out of atan2's and sqrt's
builtin_rules["atan"] = _weak_unary(lambda cx, x: cx.elementwise("atan2", x, 1))
builtin_rules["asin"] = _weak_unary(lambda cx, x: cx.op("atan2", x, _cosine_side(cx, x)))
builtin_rules["acos"] = _weak_unary(lambda cx, x: cx.op("atan2", _cosine_side(cx, x), x))


def _binary(op: str, first: str, second: str) -> Builtin:
    """The builtin `op(first, second)`: that elementwise op, with broadcasting and weak literals."""
    def binary_expand(cx: Scope, a: Args) -> Value | Deferred:
        return cx.elementwise(op, a[first], a[second])
    return Builtin((first, second), {}, binary_expand)


# pow(x, y) is x ** y; minimum and maximum propagate nan
builtin_rules.update({"atan2": _binary("atan2", "y", "x"), "hypot": _binary("hypot", "x", "y"),
                      "pow": _binary("pow", "x", "y"), "minimum": _binary("minimum", "x", "y"),
                      "maximum": _binary("maximum", "x", "y")})


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
    return cx.elementwise("div", 1, _float_tensor(a, "x"))


@builtin("isnan", "x")
def isnan_expand(cx, a):
    # isnan(x) = x != x, the one value unequal to itself
    x = _float_tensor(a, "x")
    return cx.op("ne", x, x)


@builtin("isinf", "x")
def isinf_expand(cx, a):
    # isinf(x) = |x| == inf
    return cx.elementwise("eq", cx.op("abs", _float_tensor(a, "x")), float("inf"))


@builtin("isfinite", "x")
def isfinite_expand(cx, a):
    # isfinite(x) = |x| < inf, false for nan (an ordered comparison)
    return cx.elementwise("lt", cx.op("abs", _float_tensor(a, "x")), float("inf"))


@builtin("where", "cond", "a", "b")
def where_expand(cx, a):
    return cx.select(a["cond"], a["a"], a["b"])


@builtin("clip", "x", "lo", "hi")
def clip_expand(cx, a):
    # clip(x, lo, hi) = minimum(maximum(x, lo), hi)
    return cx.elementwise("minimum", cx.elementwise("maximum", a.tensor("x"), a["lo"]), a["hi"])


# ---------------------------------------------------------------- reductions


def _reduce(cx: Scope, a: Args, op: str, x: Value | None = None) -> Value:
    """`op` over the `axis` argument, then the reduced axes kept as 1s when `keepdims`."""
    x = a.tensor("x") if x is None else x
    axes = a.axes("axis", x.type.rank)
    out = cx.op(op, x, axes=axes)
    return _keepdims(cx, out, x.type.shape, axes) if a.flag("keepdims") else out


def _keepdims(cx: Scope, v: Value, shape: tuple[Dim, ...], axes: tuple[int, ...]) -> Value:
    return cx.reshape(v, tuple(1 if i in axes else d for i, d in enumerate(shape)))


def _reduction(name: str, op: str):
    def reduce_expand(cx: Scope, a: Args) -> Value:
        return _reduce(cx, a, op)
    builtin_rules[name] = Builtin(("x", "axis", "keepdims"), {"axis": None, "keepdims": False}, reduce_expand)


for _name, _op in (("sum", "reduce_sum"), ("max", "reduce_max"), ("min", "reduce_min"), ("prod", "reduce_prod")):
    _reduction(_name, _op)


def _float_tensor(a: Args, key: str) -> Value:
    x = a.tensor(key)
    if not x.type.dtype.is_float:
        raise a.error(key, f"expected a float tensor, got {x.type}; convert it with f32(...) or f64(...)")
    return x


def _count(cx: Scope, shape: tuple[Dim, ...], axes: tuple[int, ...], dtype: DType) -> Value:
    """The number of reduced elements as a scalar; symbolic counts use the `dim` op."""
    count = num_elements(tuple(shape[i] for i in axes))
    return cx.op("dim", dtype=dtype, value=count) if isinstance(count, SymDim) else cx.constant(count, dtype)


@builtin("mean", "x", axis=None, keepdims=False)
def mean_expand(cx, a):
    # mean(x) = sum(x) / count
    x = _float_tensor(a, "x")
    total = _reduce(cx, a, "reduce_sum", x)
    return cx.elementwise("div", total, _count(cx, x.type.shape, a.axes("axis", x.type.rank), x.type.dtype))


def _root_of_squares(cx: Scope, squares: Value) -> Value:
    """sqrt of a sum of squares, whose derivatives are 0 where the sum is 0: at the tip of the cone,
    where a norm has none, it takes abs's convention (the norm of one element is |x|, abs'(0) = 0)
    instead of 0/0 = nan. The inner select keeps sqrt's infinite slope at 0 out of every derivative
    (the double-where idiom); nan stays nan."""
    zero = cx.elementwise("eq", squares, 0)
    return cx.select(zero, 0, cx.op("sqrt", cx.select(zero, 1, squares)))


@builtin("norm", "x", axis=None, keepdims=False)
def norm_expand(cx, a):
    # norm(x) = sqrt(sum(x * x)), its gradient 0 at x = 0
    x = _float_tensor(a, "x")
    return _root_of_squares(cx, _reduce(cx, a, "reduce_sum", cx.op("mul", x, x)))


@builtin("clip_by_norm", "t", "clip_norm", axes=None)
def clip_by_norm_expand(cx, a):
    # TensorFlow's formula t * c / maximum(norm(t), c); the norm's gradient is finite at t = 0
    t = _float_tensor(a, "t")
    axes = a.axes("axes", t.type.rank)
    l2sum = _keepdims(cx, cx.op("reduce_sum", cx.op("mul", t, t), axes=axes), t.type.shape, axes)
    l2norm = _root_of_squares(cx, l2sum)
    clip_norm = a.tensor("clip_norm", t.type.dtype)
    return cx.elementwise("div", cx.elementwise("mul", t, clip_norm), cx.elementwise("maximum", l2norm, clip_norm))


# ---------------------------------------------------------------- scans


def _along_axis(cx: Scope, a: Args, bools_as: DType) -> tuple[Value, Value, int, bool]:
    """x (bools converted to `bools_as`), what to work along (x flattened when axis=None, as NumPy
    does), the axis, and whether x was flattened."""
    x = a.tensor("x")
    if x.type.dtype is BOOL:
        x = cx.op("convert", x, dtype=bools_as)
    flat = a["axis"] is None
    along = cx.reshape(x, (num_elements(x.type.shape),)) if flat else x
    return x, along, 0 if flat else a.axis("axis", x.type.rank), flat


def _scan(name: str):
    def scan_expand(cx: Scope, a: Args) -> Value:
        # np.cumsum / np.cumprod in x's dtype (bools as i64); axis=None scans x flattened, as NumPy's
        _, along, axis, _ = _along_axis(cx, a, DType.i64)
        return cx.op(name, along, axis=axis, exclusive=a.flag("exclusive"), reverse=a.flag("reverse"))
    builtin_rules[name] = Builtin(("x", "axis", "exclusive", "reverse"),
                                  {"axis": None, "exclusive": False, "reverse": False}, scan_expand)


for _name in ("cumsum", "cumprod"):
    _scan(_name)


# ---------------------------------------------------------------- softmax family


def _shift(cx: Scope, x: Value, axes: tuple[int, ...], finite: bool) -> Value:
    """The max over `axes` (kept as 1s) under stop_gradient: subtracting it keeps exp below overflow,
    and a constant shift cancels in the value, so the exact gradient is left. `finite` puts 0 for
    an infinite or nan max (SciPy's logsumexp), so -inf - -inf never makes a nan."""
    m = _keepdims(cx, cx.op("reduce_max", x, axes=axes), x.type.shape, axes)
    if finite:
        m = cx.select(cx.elementwise("lt", cx.op("abs", m), float("inf")), m, 0)
    return cx.op("stop_gradient", m)


def _log_sum_exp(cx: Scope, x: Value, axes: tuple[int, ...]) -> tuple[Value, Value]:
    """(log(sum(exp(x - s))) with the reduced axes kept as 1s, the shift s): their sum is logsumexp."""
    s = _shift(cx, x, axes, finite=True)
    total = cx.op("reduce_sum", cx.op("exp", cx.elementwise("sub", x, s)), axes=axes)
    return cx.op("log", _keepdims(cx, total, x.type.shape, axes)), s


@builtin("logsumexp", "x", axis=None, keepdims=False)
def logsumexp_expand(cx, a):
    # logsumexp(x) = log(sum(exp(x - m))) + m, m = max(x) where finite else 0, as scipy.special
    x = _float_tensor(a, "x")
    axes = a.axes("axis", x.type.rank)
    log_total, s = _log_sum_exp(cx, x, axes)
    out = cx.op("add", log_total, s)
    return out if a.flag("keepdims") else cx.reshape(out, _reduced_shape(x.type.shape, axes))


def _reduced_shape(shape: tuple[Dim, ...], axes: tuple[int, ...]) -> tuple[Dim, ...]:
    return tuple(d for i, d in enumerate(shape) if i not in axes)


@builtin("softmax", "x", axis=-1)
def softmax_expand(cx, a):
    # softmax(x) = e / sum(e), e = exp(x - max(x)), as scipy.special.softmax (a row holding inf
    # or only -inf is nan)
    x = _float_tensor(a, "x")
    axes = a.axes("axis", x.type.rank)
    e = cx.op("exp", cx.elementwise("sub", x, _shift(cx, x, axes, finite=False)))
    return cx.elementwise("div", e, _keepdims(cx, cx.op("reduce_sum", e, axes=axes), x.type.shape, axes))


@builtin("log_softmax", "x", axis=-1)
def log_softmax_expand(cx, a):
    # log_softmax(x) = (x - s) - log(sum(exp(x - s))), s = max(x) where finite else 0, as
    # scipy.special.log_softmax
    x = _float_tensor(a, "x")
    log_total, s = _log_sum_exp(cx, x, a.axes("axis", x.type.rank))
    return cx.elementwise("sub", cx.elementwise("sub", x, s), log_total)


# ---------------------------------------------------------------- arg-reductions and truth


def _arg_reduction(name: str):
    def arg_reduce_expand(cx: Scope, a: Args) -> Value:
        # axis=None: the index into the flattened tensor, as NumPy's; bools compare as 0 and 1
        x, along, axis, flat = _along_axis(cx, a, DType.i32)
        if along.type.shape[axis] == 0:
            raise a.error("x", f"{'' if flat else f'axis {axis} of '}{x.type} is empty, so it has no first "
                               f"{name[3:]}imum")
        out = cx.op(name, along, axes=(axis,))
        kept = tuple(range(x.type.rank)) if flat else (axis,)
        return _keepdims(cx, out, x.type.shape, kept) if a.flag("keepdims") else out
    builtin_rules[name] = Builtin(("x", "axis", "keepdims"), {"axis": None, "keepdims": False}, arg_reduce_expand)


for _name in ("argmax", "argmin"):
    _arg_reduction(_name)


def _truth(cx: Scope, x: Value) -> Value:
    """x != 0 elementwise (a bool is itself); nan is true, as in NumPy."""
    return x if x.type.dtype is BOOL else cx.elementwise("ne", x, 0)


@builtin("count_nonzero", "x", axis=None, keepdims=False)
def count_nonzero_expand(cx, a):
    # count_nonzero(x) = sum(i64(x != 0))
    return _reduce(cx, a, "reduce_sum", cx.op("convert", _truth(cx, a.tensor("x")), dtype=DType.i64))


@builtin("any", "x", axis=None, keepdims=False)
def any_expand(cx, a):
    # any(x) = max(i32(x != 0)) > 0; an empty max is INT_MIN, so an empty any is False
    ones = cx.op("convert", _truth(cx, a.tensor("x")), dtype=DType.i32)
    return cx.elementwise("gt", _reduce(cx, a, "reduce_max", ones), 0)


@builtin("all", "x", axis=None, keepdims=False)
def all_expand(cx, a):
    # all(x) = min(i32(x != 0)) > 0; an empty min is INT_MAX, so an empty all is True
    ones = cx.op("convert", _truth(cx, a.tensor("x")), dtype=DType.i32)
    return cx.elementwise("gt", _reduce(cx, a, "reduce_min", ones), 0)


@builtin("one_hot", "indices", "depth", dtype=None)
def one_hot_expand(cx, a):
    # one_hot(i, d)[..., k] = (i == k): an index outside [0, d) gives a row of zeros, as tf.one_hot
    indices, depth = a.tensor("indices"), a.dim("depth")
    if not indices.type.dtype.is_int:
        raise a.error("indices", f"expected an integer tensor, got {indices.type}; convert it with i32(...) or i64(...)")
    shape = indices.type.shape + (depth,)
    positions = cx.op("iota", axis=len(shape) - 1, dtype=indices.type.dtype, shape=shape)
    hot = cx.op("eq", cx.op("broadcast", indices, dims=tuple(range(indices.type.rank)), shape=shape), positions)
    dtype = a.dtype("dtype") or F32
    return hot if dtype is BOOL else cx.op("convert", hot, dtype=dtype)


# ---------------------------------------------------------------- structure


@builtin("transpose", "x", perm=None)
def transpose_expand(cx, a):
    x = a.tensor("x")
    rank = x.type.rank
    perm = None if a["perm"] is None else _int_list(a, "perm", rank)
    if perm is not None and sorted(perm) != list(range(rank)):
        raise a.error("perm", f"{list(perm)} is not a permutation of the {rank} axes of {x.type}")
    return cx.transpose(x, perm)


def _int_list(a: Args, key: str, rank: int) -> tuple[int, ...]:
    value = a[key]
    if not isinstance(value, list):
        raise a.error(key, f"'{key}' must be a list of axes, got {describe(value)}")
    return tuple(a.axis(key, rank, v) for v in value)


@builtin("reshape", "x", "shape")
def reshape_expand(cx, a):
    x = a.tensor("x")
    shape = list(a["shape"]) if isinstance(a["shape"], list) else [a["shape"]]
    holes = [i for i, d in enumerate(shape) if d == -1]
    if len(holes) > 1:
        raise a.error("shape", "at most one size can be -1")
    if holes:
        shape[holes[0]] = _infer_size(a, x.type, [d for d in shape if d != -1])
    shape = tuple(a.dim("shape", d) for d in shape)
    if num_elements(shape) != num_elements(x.type.shape):
        raise a.error("shape", f"cannot reshape {x.type} to [{','.join(map(str, shape))}]: element counts differ")
    return cx.reshape(x, shape)


def _infer_size(a: Args, t: TensorType, known: list) -> Dim:
    """The size that makes the element counts agree, when a division finds it exactly."""
    total, part = num_elements(t.shape), num_elements(tuple(a.dim("shape", d) for d in known))
    if isinstance(total, int) and isinstance(part, int) and part and total % part == 0:
        return total // part
    if isinstance(part, SymDim) and len(part.terms) == 1:
        quotient = _divide_monomial(total, *part.terms[0])
        if quotient is not None:
            return quotient
    if isinstance(total, SymDim) and isinstance(part, int) and part and all(c % part == 0 for _, c in total.terms):
        return SymDim.of({m: c // part for m, c in total.terms})
    raise a.error("shape", f"cannot infer the -1 size: {t} has {total} elements, not a multiple of {part}")


def _divide_monomial(total: Dim, mono: tuple[str, ...], coefficient: int) -> Dim | None:
    """total / (coefficient * mono) when every term of total divides exactly, else None."""
    if not isinstance(total, SymDim):
        return None
    terms = {}
    for m, c in total.terms:
        rest = list(m)
        for s in mono:
            if s not in rest:
                return None
            rest.remove(s)
        if c % coefficient:
            return None
        terms[tuple(rest)] = c // coefficient
    return SymDim.of(terms)


@builtin("broadcast_to", "x", "shape")
def broadcast_to_expand(cx, a):
    x, shape = a.tensor("x"), a.shape("shape")
    aligned = shape[len(shape) - x.type.rank:] if x.type.rank <= len(shape) else None
    if aligned is None or any(s != 1 and s != d for s, d in zip(x.type.shape, aligned)):
        raise a.error("shape", f"cannot broadcast {x.type} to [{','.join(map(str, shape))}]")
    return cx.broadcast(x, shape)


@builtin("concat", "values", axis=0)
def concat_expand(cx, a):
    values = a.tensors("values")
    axis = a.axis("axis", values[0].type.rank)
    return values[0] if len(values) == 1 else cx.op("concat", *values, axis=axis)


@builtin("stack", "values", axis=0)
def stack_expand(cx, a):
    # stack = concat of the values, each with a new axis of size 1
    values = a.tensors("values")
    first = values[0].type
    for v in values[1:]:
        if v.type != first:
            raise a.error("values", f"stacked tensors must have one type, got {first} and {v.type}")
    axis = a.axis("axis", first.rank + 1)
    shape = first.shape[:axis] + (1,) + first.shape[axis:]
    expanded = [cx.reshape(v, shape) for v in values]
    return expanded[0] if len(values) == 1 else cx.op("concat", *expanded, axis=axis)


@builtin("pad", "x", "widths", value=None)
def pad_expand(cx, a):
    # the default value is the dtype's zero: False for a bool tensor, as NumPy pads
    x = a.tensor("x")
    low, high = _pad_widths(a, x.type.rank)
    if a["value"] is None:
        value = cx.constant(False if x.type.dtype is BOOL else 0, x.type.dtype)
    else:
        value = a.tensor("value", x.type.dtype)
    if value.type != TensorType(x.type.dtype):
        raise a.error("value", f"the padding value must be a {x.type.dtype} scalar, got {value.type}")
    return cx.op("pad", x, value, low=low, high=high)


def _pad_widths(a: Args, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """NumPy's forms: n, (low, high), or one (low, high) pair per axis."""
    widths = a["widths"]
    if type(widths) is int:
        widths = [[widths, widths]]
    if isinstance(widths, list) and len(widths) == 2 and all(type(w) is int for w in widths):
        widths = [widths]
    if not isinstance(widths, list) or not all(isinstance(w, list) and len(w) == 2 for w in widths):
        raise a.error("widths", "widths must be a list of (low, high) pairs")
    if len(widths) == 1:
        widths = widths * rank
    if len(widths) != rank:
        raise a.error("widths", f"expected {rank} (low, high) pairs, got {len(widths)}")
    pairs = [(a.static_int("widths", lo), a.static_int("widths", hi)) for lo, hi in widths]
    if any(n < 0 for pair in pairs for n in pair):
        raise a.error("widths", "padding widths cannot be negative")
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


@builtin("matmul", "a", "b")
def matmul_expand(cx, a):
    return matmul(cx, a.tensor("a"), a.tensor("b"))


def matmul(cx: Scope, x: Value, y: Value) -> Value:
    """NumPy's matmul: 1-D operands gain then lose an axis; batch dimensions broadcast."""
    if x.type.rank == 0 or y.type.rank == 0:
        raise cx.error(f"matmul needs operands of rank >= 1, got {x.type} and {y.type}")
    cx.common_dtype([x, y])
    xs, ys = x.type.shape, y.type.shape
    x2 = cx.reshape(x, (1,) + xs) if x.type.rank == 1 else x
    y2 = cx.reshape(y, ys + (1,)) if y.type.rank == 1 else y
    if x2.type.shape[-1] != y2.type.shape[-2]:
        raise cx.error(f"matmul: contracted dimensions differ: {x.type} @ {y.type} ({x2.type.shape[-1]} "
                       f"against {y2.type.shape[-2]})")
    batch = cx.broadcast_shape([TensorType(x.type.dtype, x2.type.shape[:-2]), TensorType(x.type.dtype, y2.type.shape[:-2])])
    product = cx.op("matmul", cx.broadcast(x2, batch + x2.type.shape[-2:]), cx.broadcast(y2, batch + y2.type.shape[-2:]))
    out = batch + (xs[-2:-1] if x.type.rank > 1 else ()) + (ys[-1:] if y.type.rank > 1 else ())
    return cx.reshape(product, out)


# ---------------------------------------------------------------- indexing by integer tensors


def index_tensor(cx: Scope, value: object) -> Value:
    """`value` as indices: an i32 or i64 tensor, or a static integer (an i64 scalar). A bool is
    refused as NumPy's integer indexing refuses it (NumPy reads a bool index as a mask)."""
    if type(value) is int or isinstance(value, SymDim):
        return cx.tensor(value, DType.i64)
    if not isinstance(value, (Value, Deferred)):
        hint = _NOT_A_MASK if isinstance(value, bool) else ""
        raise cx.error(f"indices must be an i32 or i64 tensor, got {describe(value)}{hint}")
    indices = cx.tensor(value, DType.i64)
    if not indices.type.dtype.is_int:
        hint = _NOT_A_MASK if indices.type.dtype is BOOL else "; convert them with i64(...)"
        raise cx.error(f"indices must be an i32 or i64 tensor, got {indices.type}{hint}")
    return indices


_NOT_A_MASK = ("; a bool is not an index (NumPy would read it as a mask, which adc does not support): "
               "select with where(...), or convert it with i64(...)")


def _indices_arg(a: Args, key: str) -> Value:
    with a.cx.b.at(a.values[key][1]):
        return index_tensor(a.cx, a[key])


@builtin("take", "x", "indices", axis=0)
def take_expand(cx, a):
    x = a.tensor("x")
    # np.take(x, indices, axis) under adc's index rule (docs/language.md)
    return cx.op("gather", x, _indices_arg(a, "indices"), axis=a.axis("axis", x.type.rank))


@builtin("take_along_axis", "x", "indices", "axis")
def take_along_axis_expand(cx, a):
    # np.take_along_axis under the index rule: each index counted from the end once when negative and
    # clamped along `axis`, then offset by its row into one gather from x flattened with `axis` last
    x = a.tensor("x")
    indices = _indices_arg(a, "indices")
    rank = x.type.rank
    axis = a.axis("axis", rank)
    if indices.type.rank != rank:
        raise a.error("indices", f"take_along_axis needs indices of x's rank {rank}, got {indices.type}")
    shape = tuple(k if d == axis else n for d, (n, k) in enumerate(zip(x.type.shape, indices.type.shape)))
    if any(k not in (1, n) for d, (n, k) in enumerate(zip(x.type.shape, indices.type.shape)) if d != axis):
        raise a.error("indices", f"indices {indices.type} do not broadcast against x {x.type} "
                                 f"outside axis {axis}")
    perm = tuple(d for d in range(rank) if d != axis) + (axis,)
    rows_shape = tuple(shape[d] for d in perm[:-1])
    n, k, rows = x.type.shape[axis], shape[axis], num_elements(rows_shape)
    i = cx.reshape(cx.transpose(cx.op("broadcast", indices, dims=tuple(range(rank)), shape=shape)
                                if indices.type.shape != shape else indices, perm), (rows, k))
    size = cx.tensor(n, i.type.dtype)
    i = cx.select(cx.elementwise("lt", i, 0), cx.elementwise("add", i, size), i)
    i = cx.elementwise("maximum", cx.elementwise("minimum", i, cx.elementwise("sub", size, 1)), 0)
    offsets = cx.elementwise("mul", cx.op("iota", axis=0, dtype=i.type.dtype, shape=(rows, k)), size)
    flat = cx.reshape(cx.transpose(x, perm), (num_elements(rows_shape + (n,)),))
    taken = cx.reshape(cx.op("gather", flat, cx.elementwise("add", i, offsets), axis=0), rows_shape + (k,))
    return cx.transpose(taken, tuple(sorted(range(rank), key=lambda d: perm[d])))


@builtin("scatter_add", "base", "indices", "updates", axis=0)
def scatter_add_expand(cx, a):
    # np.add.at on a copy of base: duplicate indices accumulate
    if a.tensor("base").type.dtype is BOOL:
        raise a.error("base", f"cannot add into {a.tensor('base').type}")
    return _scatter(cx, a, "scatter_add")


@builtin("scatter", "base", "indices", "updates", axis=0)
def scatter_expand(cx, a):
    # base[..., indices, ...] = updates on a copy of base: of duplicate indices the last one stays
    return _scatter(cx, a, "scatter")


def _scatter(cx, a, name: str) -> Value:
    base = a.tensor("base")
    axis = a.axis("axis", base.type.rank)
    indices = _indices_arg(a, "indices")
    updates = a.tensor("updates", base.type.dtype)
    expected = TensorType(base.type.dtype, gathered_shape(base.type, indices.type, axis))
    if updates.type.dtype != base.type.dtype:
        raise a.error("updates", f"updates must be {base.type.dtype} like base, got {updates.type}")
    with cx.b.at(a.values["updates"][1]):
        updates = cx.broadcast(updates, expected.shape) if _broadcasts(updates.type, expected) else updates
    if updates.type != expected:
        raise a.error("updates", f"updates must be {expected} ({base.type} indexed by {indices.type} "
                                 f"along axis {axis}), got {updates.type}")
    return cx.op(name, base, indices, updates, axis=axis)


def _broadcasts(t: TensorType, to: TensorType) -> bool:
    """True when NumPy broadcasting takes `t` to `to` without changing `to` (np.add.at allows it)."""
    if t.rank > to.rank:
        return False
    return all(s == 1 or s == d for s, d in zip(t.shape, to.shape[to.rank - t.rank:]))


# ---------------------------------------------------------------- creation


def _filled(cx: Scope, a: Args, value: object, dtype: DType | None) -> Value | Deferred:
    shape = a.shape("shape")
    return typed(cx, dtype, lambda dt: cx.broadcast(cx.tensor(value, dt), shape))


def typed(cx: Scope, dtype: DType | None, make: Callable[[DType], Value]) -> Value | Deferred:
    """`make(dtype)` now, or a `Deferred` built later, at this location, in the dtype of its context."""
    if dtype is not None:
        return make(dtype)
    loc = cx.b.loc

    def make_here(dt: DType) -> Value:
        with cx.b.at(loc):
            return make(dt)
    return Deferred(make_here)


@builtin("zeros", "shape", dtype=None)
def zeros_expand(cx, a):
    return _filled(cx, a, 0, a.dtype("dtype"))


@builtin("ones", "shape", dtype=None)
def ones_expand(cx, a):
    return _filled(cx, a, 1, a.dtype("dtype"))


@builtin("full", "shape", "value", dtype=None)
def full_expand(cx, a):
    dtype = a.dtype("dtype") or (a["value"].type.dtype if isinstance(a["value"], Value) else None)
    return typed(cx, dtype, lambda dt: _full(cx, a, dt))


def _full(cx: Scope, a: Args, dtype: DType) -> Value:
    value = a.tensor("value", dtype)
    if value.type != TensorType(dtype):
        raise a.error("value", f"the fill value must be a {dtype} scalar, got {value.type}")
    return cx.broadcast(value, a.shape("shape"))


@builtin("linspace", "start", "stop", "num", dtype=None)
def linspace_expand(cx, a):
    tensors = [v for v in (a["start"], a["stop"]) if isinstance(v, Value)]
    dtype = a.dtype("dtype") or (cx.common_dtype(tensors) if tensors else None)
    return typed(cx, dtype, lambda dt: _linspace(cx, a, dt))


def _linspace(cx: Scope, a: Args, dtype: DType) -> Value:
    # start + iota * (stop - start) / maximum(num - 1, 1): num = 1 gives [start]
    num = a.dim("num")
    start, stop = a.tensor("start", dtype), a.tensor("stop", dtype)
    for key, v in (("start", start), ("stop", stop)):
        if v.type != TensorType(dtype):
            raise a.error(key, f"'{key}' must be a {dtype} scalar, got {v.type}")
    steps = cx.constant(max(num - 1, 1), dtype) if isinstance(num, int) else \
        cx.elementwise("maximum", cx.op("dim", dtype=dtype, value=num - 1), 1)
    step = cx.op("div", cx.op("sub", stop, start), steps)
    ramp = cx.op("iota", axis=0, dtype=dtype, shape=(num,))
    return cx.elementwise("add", start, cx.elementwise("mul", ramp, step))


def _cast(dtype: DType):
    def cast_expand(cx: Scope, a: Args) -> Value:
        x = a.tensor("x", dtype)
        return x if x.type.dtype == dtype else cx.op("convert", x, dtype=dtype)
    return cast_expand


for _dtype in (DType.f32, DType.f64, DType.i32, DType.i64):
    builtin_rules[_dtype.value] = Builtin(("x",), {}, _cast(_dtype))
