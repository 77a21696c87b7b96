"""The builtins that work along axes: reductions, scans, the softmax family, arg-reductions, truth.

Part of the builtins (`adc/frontend/builtins/__init__.py` gathers the families' tables).
`axis` takes None (every axis, or x flattened where NumPy flattens), an int or a list, negative
ones counting from the end; `keepdims` keeps the reduced axes as 1s. Compositions keep their
derivatives finite where the math allows (a norm at 0, logsumexp of -inf):

    mean(x)        %0 = reduce_sum %x {axes = [0]} : f32          (x: f32[N])
                   %1 = dim {dtype = f32, value = N} : f32
                   %2 = div %0, %1 : f32
"""
from __future__ import annotations

from adc.frontend.arguments import Args, Builtin, registrar
from adc.frontend.scope import Scope
from adc.ir.core import Value
from adc.ir.ops import with_trait
from adc.ir.types import BOOL, DType, Dim, SymDim, num_elements

builtin_rules: dict[str, Builtin] = {}
builtin = registrar(builtin_rules)


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


def _count(cx: Scope, shape: tuple[Dim, ...], axes: tuple[int, ...], dtype: DType) -> Value:
    """The number of reduced elements as a scalar; symbolic counts use the `dim` op."""
    count = num_elements(tuple(shape[i] for i in axes))
    return cx.op("dim", dtype=dtype, value=count) if isinstance(count, SymDim) else cx.constant(count, dtype)


@builtin("mean", "x", axis=None, keepdims=False)
def mean_expand(cx, a):
    # mean(x) = sum(x) / count
    x = a.float_tensor("x")
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
    x = a.float_tensor("x")
    return _root_of_squares(cx, _reduce(cx, a, "reduce_sum", cx.op("mul", x, x)))


@builtin("clip_by_norm", "t", "clip_norm", axes=None)
def clip_by_norm_expand(cx, a):
    # TensorFlow's formula t * c / maximum(norm(t), c); the norm's gradient is finite at t = 0
    t = a.float_tensor("t")
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


for _name in sorted(with_trait("scan")):      # cumsum, cumprod
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
    x = a.float_tensor("x")
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
    x = a.float_tensor("x")
    axes = a.axes("axis", x.type.rank)
    e = cx.op("exp", cx.elementwise("sub", x, _shift(cx, x, axes, finite=False)))
    return cx.elementwise("div", e, _keepdims(cx, cx.op("reduce_sum", e, axes=axes), x.type.shape, axes))


@builtin("log_softmax", "x", axis=-1)
def log_softmax_expand(cx, a):
    # log_softmax(x) = (x - s) - log(sum(exp(x - s))), s = max(x) where finite else 0, as
    # scipy.special.log_softmax
    x = a.float_tensor("x")
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


for _name in sorted(with_trait("index_result")):       # argmax, argmin
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
