"""The builtins that make tensors: zeros, ones, full, linspace, one_hot.

Part of the builtins (`adc/frontend/builtins/__init__.py` gathers the families' tables).
Without a `dtype` argument or a tensor to take it from, a made tensor is `Deferred`: weak like
a literal, its dtype decided by the expression it meets (f32 where none does):

    zeros([N]) + x     %0 = constant {dtype = f64, value = 0.0} : f64     (x: f64[N])
                       %1 = broadcast %0 {dims = [], shape = [N]} : f64[N]
                       %2 = add %1, %x : f64[N]
"""
from __future__ import annotations

from adc.frontend.arguments import Args, Builtin, registrar
from adc.frontend.scope import Deferred, Scope, typed
from adc.ir.core import Value
from adc.ir.types import BOOL, F32, DType, TensorType

builtin_rules: dict[str, Builtin] = {}
builtin = registrar(builtin_rules)


def _filled(cx: Scope, a: Args, value: object, dtype: DType | None) -> Value | Deferred:
    shape = a.shape("shape")
    return typed(cx, dtype, lambda dt: cx.broadcast(cx.tensor(value, dt), shape))


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
