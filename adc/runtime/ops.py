"""The eager op library: adc.sin, adc.matmul, adc.reduce_sum, ... and the Tensor operators.

Each op is a kernel call (its kernel written in the adc language by
adc/runtime/stdlib.py, per dtypes, ranks, size-1 dims and static attributes),
so eager code and user kernels are recorded on a GradientTape the same way and
differentiated by the same adjoint pass. Operands: Tensors and Variables keep
their dtype, NumPy values too; Python numbers and lists take the dtype of the
other operands (f32 for a float, i32 for an int when alone), as in TensorFlow.

    x = adc.constant([[1.0], [2.0]])     # f32[2, 1]
    x * [1.0, 2.0, 3.0]                  # eager_multiply(x: f32[D0, 1], y: f32[D1]) -> f32[D0, D1]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from adc.ir.ops import OPS
from adc.runtime import stdlib
from adc.runtime.indexing import getitem
from adc.runtime.stdlib import definition, tensor_type
from adc.runtime.tensor import Tensor, constant, numpy_dtype
from adc.runtime.variable import Variable

_STRONG = (Tensor, Variable, np.ndarray, np.generic)
_BOOL = np.dtype(bool)
_SEEN_LIMIT = 4096   # signatures remembered per binary op


def convert_to_tensor(value, dtype=None) -> Tensor:
    """A Tensor as it is (a Variable's current value), anything else through `constant`."""
    if isinstance(value, Variable):
        value = value.value()
    if isinstance(value, Tensor) and (dtype is None or value.dtype == numpy_dtype(dtype)):
        return value
    return constant(value, dtype)


def operands(op: str, values: Sequence, dtype=None) -> list:
    """Tensors and Variables as they are; other values become Tensors of the operands' dtype."""
    strong = [v.dtype for v in values if isinstance(v, _STRONG)]
    for d in strong:
        if d != strong[0]:
            raise TypeError(f"adc.{op}: operands of different dtypes {strong[0]} and {d}; "
                            "convert one with adc.cast")
    dtype = strong[0] if strong else dtype
    return [v if type(v) is Tensor or type(v) is Variable else constant(v, dtype) for v in values]


def size_one_axes(shape: tuple[int, ...]) -> tuple[bool, ...]:
    """Which dims of `shape` are 1: the broadcasting pattern an eager kernel is compiled for."""
    return tuple([d == 1 for d in shape])


def broadcast_dims(patterns: Sequence[tuple[bool, ...]], prefix: str = "D") -> tuple[list, list]:
    """Symbolic dims for operands whose size-1 dims are `patterns`: (per operand, result)."""
    rank = max(map(len, patterns), default=0)
    out = []
    for axis in range(rank):
        ones = [p[axis - rank + len(p)] for p in patterns if axis >= rank - len(p)]
        out.append("1" if all(ones) else f"{prefix}{axis}")
    return [["1" if one else out[rank - len(p) + i] for i, one in enumerate(p)] for p in patterns], out


def check_broadcast(op: str, shapes: Sequence[tuple[int, ...]]) -> None:
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(f"adc.{op}: incompatible shapes {' vs. '.join(map(str, shapes))}") from None


def _elementwise(op: str, expr: str, names: Sequence[str], args: Sequence, result_dtype=None):
    """The kernel of (op, dtypes, size-1 dims) computing `expr` of `names` with broadcasting."""
    shapes = [t.shape for t in args]
    if shapes.count(shapes[0]) != len(shapes):
        check_broadcast(op, shapes)
    patterns = [size_one_axes(s) for s in shapes]
    dtypes = [t.dtype for t in args]
    key = (op, *dtypes, *patterns)

    def source():
        ins, out = broadcast_dims(patterns)
        params = [(n, tensor_type(d, dims)) for n, d, dims in zip(names, dtypes, ins)]
        return definition(f"eager_{op}", params, tensor_type(result_dtype or dtypes[-1], out), expr)

    return stdlib.kernel(key, source)


def _array(value) -> np.ndarray | None:
    """The array of a Tensor or Variable, else None."""
    kind = type(value)
    return value._array if kind is Tensor else value._value._array if kind is Variable else None


def unary(op: str, expr: str, x, kinds: str = "f", result_dtype=None, attrs: tuple = ()):
    """One kernel per (op, dtype, rank, attrs): `expr` of x, elementwise."""
    array = _array(x)
    if array is not None:   # a Tensor or Variable whose kernel is compiled: checked when it was
        kernel = stdlib.compiled((op, array.dtype, array.ndim) + attrs)
        if kernel is not None:
            return kernel(x)
    (x,) = operands(op, (x,))
    if x.dtype.kind not in kinds:
        raise TypeError(f"adc.{op} expects a {'floating' if kinds == 'f' else 'numeric'} tensor, got {x.dtype}")
    key = (op, x.dtype, x.ndim) + attrs

    def source():
        dims = [f"D{i}" for i in range(x.ndim)]
        result = tensor_type(result_dtype or x.dtype, dims)
        return definition(f"eager_{op}", [("x", tensor_type(x.dtype, dims))], result, expr)

    return stdlib.kernel(key, source)(x)


def make_unary(op: str, builtin: str, kinds: str = "f"):
    expr = f"{builtin}(x)"

    def function(x):
        return unary(op, expr, x, kinds)

    function.__name__ = function.__qualname__ = op
    function.__doc__ = f"Elementwise {builtin}(x), as the language's builtin."
    return function


_KINDS = {"float": "f", "numeric": "fi", "any": "fib"}     # an op's operand dtypes -> the NumPy kinds it takes
# The eager function of each unary op that is a builtin of the language, by the builtin's name:
# adc.sin, adc.math.log2, np.sin(tensor), ... (the op records, adc/ir/ops, say which and how)
BUILTIN_UNARY = {op.builtin: make_unary(op.builtin, op.builtin, _KINDS[op.dtypes])
                 for op in OPS.values() if op.builtin is not None and op.arity == 1}
sin, cos, tan = BUILTIN_UNARY["sin"], BUILTIN_UNARY["cos"], BUILTIN_UNARY["tan"]
exp, log, log1p, expm1 = BUILTIN_UNARY["exp"], BUILTIN_UNARY["log"], BUILTIN_UNARY["log1p"], BUILTIN_UNARY["expm1"]
sqrt, rsqrt = BUILTIN_UNARY["sqrt"], BUILTIN_UNARY["rsqrt"]
abs_, sign = BUILTIN_UNARY["abs"], BUILTIN_UNARY["sign"]
tanh, sigmoid = BUILTIN_UNARY["tanh"], BUILTIN_UNARY["sigmoid"]
round_, floor = BUILTIN_UNARY["round"], BUILTIN_UNARY["floor"]
stop_gradient = BUILTIN_UNARY["stop_gradient"]
stop_gradient.__doc__ = "The identity, whose gradient is zero: a tape does not look through it."
relu, elu, softplus = make_unary("relu", "relu"), make_unary("elu", "elu"), make_unary("softplus", "softplus")


def negative(x):
    """-x."""
    return unary("negative", "-x", x, "fi")


def cast(x, dtype):
    """x converted to float32, float64, int32 or int64 (the language's f32(), f64(), ...)."""
    target = numpy_dtype(dtype)
    return unary("cast", f"{tensor_type(target, ())}(x)", x, "fib", result_dtype=target, attrs=(target,))


def _make_binary(op: str, expr: str, result_dtype=None):
    seen: dict[tuple, object] = {}   # (dtypes, shapes) of two tensors -> kernel: the fast path

    def binary(x, y):
        ax, ay = _array(x), _array(y)
        if ax is not None and ay is not None:
            signature = (ax.dtype, ay.dtype, ax.shape, ay.shape)
            kernel = seen.get(signature)
            if kernel is None:
                if len(seen) > _SEEN_LIMIT:
                    seen.clear()
                kernel = seen[signature] = _elementwise(op, expr, ("x", "y"), operands(op, (x, y)), result_dtype)
            return kernel(x, y)
        args = operands(op, (x, y))
        return _elementwise(op, expr, ("x", "y"), args, result_dtype)(*args)

    binary.__name__ = binary.__qualname__ = op
    binary.__doc__ = f"Elementwise {expr}, with NumPy broadcasting."
    return binary


add, subtract, _multiply = _make_binary("add", "x + y"), _make_binary("subtract", "x - y"), _make_binary("multiply", "x * y")
divide = _make_binary("divide", "x / y")
# The eager function of each binary op that is a builtin: adc.maximum, adc.math.atan2, np.hypot(t, u), ...
BUILTIN_BINARY = {op.builtin: _make_binary(op.builtin, f"{op.builtin}(x, y)")
                  for op in OPS.values() if op.builtin is not None and op.arity == 2}
maximum, minimum = BUILTIN_BINARY["maximum"], BUILTIN_BINARY["minimum"]
less, less_equal = _make_binary("less", "x < y", _BOOL), _make_binary("less_equal", "x <= y", _BOOL)
greater, greater_equal = _make_binary("greater", "x > y", _BOOL), _make_binary("greater_equal", "x >= y", _BOOL)
equal, not_equal = _make_binary("equal", "x == y", _BOOL), _make_binary("not_equal", "x != y", _BOOL)
atan2, hypot = BUILTIN_BINARY["atan2"], BUILTIN_BINARY["hypot"]
_general_pow = BUILTIN_BINARY["pow"]
_LITERAL_EXPONENTS = range(-4, 5)   # x ** 2 becomes x * x in the language: exact, and so is its derivative
_POWERS = {n: f"x ** {n}" for n in _LITERAL_EXPONENTS}


def pow_(x, y):
    """x ** y elementwise; a small integer exponent given as a Python number is written into the kernel."""
    if type(y) in (int, float) and y == int(y) and int(y) in _LITERAL_EXPONENTS:
        n = int(y)
        return unary("pow", _POWERS[n], x, "fi", None, (n,))
    return _general_pow(x, y)


def multiply(x, y):
    """x * y elementwise, with NumPy broadcasting; `x * x` is the one-input kernel `x ** 2`, so its
    gradient is one call (2 x ct) rather than two cotangents to sum."""
    if x is y and (type(x) is Tensor or type(x) is Variable):
        return unary("pow", _POWERS[2], x, "fi", None, (2,))
    return _multiply(x, y)


def where(condition, x, y):
    """x where condition is true, else y, with broadcasting (tf.where with x and y)."""
    (condition,) = operands("where", (condition,), _BOOL)
    if condition.dtype != _BOOL:
        raise TypeError(f"adc.where: the condition must be bool, got {condition.dtype}")
    x, y = operands("where", (x, y))
    return _elementwise("where", "where(c, x, y)", ("c", "x", "y"), (condition, x, y))(condition, x, y)


def clip_by_value(t, clip_value_min, clip_value_max):
    """t clipped to [clip_value_min, clip_value_max] elementwise (the language's clip)."""
    args = operands("clip", (t, clip_value_min, clip_value_max))
    return _elementwise("clip", "clip(x, lo, hi)", ("x", "lo", "hi"), args)(*args)


clip = clip_by_value


def axes_of(op: str, x, axis) -> tuple[int, ...]:
    """Axes as sorted non-negative ints; None means all of them."""
    if axis is None:
        return tuple(range(x.ndim))
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    for a in axes:
        if not -x.ndim <= a < max(x.ndim, 1):
            raise ValueError(f"adc.{op}: axis {a} is out of range for a tensor of rank {x.ndim}")
    return tuple(sorted({int(a) % max(x.ndim, 1) for a in axes}))


def reduction(op: str, builtin: str, x, axis, keepdims: bool):
    (x,) = operands(op, (x,))
    axes = axes_of(op, x, axis)
    key = (op, x.dtype, x.ndim, axes, bool(keepdims))

    def source():
        dims = [f"D{i}" for i in range(x.ndim)]
        out = [("1" if keepdims else None) if i in axes else d for i, d in enumerate(dims)]
        body = f"{builtin}(x, axis={list(axes)}, keepdims={bool(keepdims)})" if x.ndim else f"{builtin}(x)"
        result = tensor_type(x.dtype, [d for d in out if d is not None])
        return definition(f"eager_{op}", [("x", tensor_type(x.dtype, dims))], result, body)

    return stdlib.kernel(key, source)(x)


def reduce_sum(x, axis=None, keepdims=False):
    return reduction("reduce_sum", "sum", x, axis, keepdims)


def reduce_mean(x, axis=None, keepdims=False):
    return reduction("reduce_mean", "mean", x, axis, keepdims)


def reduce_max(x, axis=None, keepdims=False):
    return reduction("reduce_max", "max", x, axis, keepdims)


def reduce_min(x, axis=None, keepdims=False):
    return reduction("reduce_min", "min", x, axis, keepdims)


def reduce_prod(x, axis=None, keepdims=False):
    return reduction("reduce_prod", "prod", x, axis, keepdims)


def norm(tensor, axis=None, keepdims=False):
    """The Euclidean norm over `axis` (all axes by default), as tf.norm."""
    return reduction("norm", "norm", tensor, axis, keepdims)


def clip_by_norm(t, clip_norm, axes=None):
    """t * clip_norm / max(norm(t, axes), clip_norm): TensorFlow's formula, the language's builtin."""
    t, clip_norm = operands("clip_by_norm", (t, clip_norm))
    axis = axes_of("clip_by_norm", t, axes)
    key = ("clip_by_norm", t.dtype, t.ndim, axis)

    def source():
        x = tensor_type(t.dtype, [f"D{i}" for i in range(t.ndim)])
        body = f"clip_by_norm(t, c, axes={list(axis)})" if t.ndim else "clip_by_norm(t, c)"
        return definition("eager_clip_by_norm", [("t", x), ("c", tensor_type(t.dtype, ()))], x, body)

    return stdlib.kernel(key, source)(t, clip_norm)


def matmul(a, b):
    """The matrix product, as NumPy's matmul (1-D operands, batched when ranks exceed 2)."""
    a, b = operands("matmul", (a, b))
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("adc.matmul: operands must have rank 1 or more (use multiply for scalars)")
    inner_b = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if a.shape[-1] != inner_b:
        raise ValueError(f"adc.matmul: Matrix size-incompatible: In[0]: {list(a.shape)}, In[1]: {list(b.shape)}")
    batches = [a.shape[:-2], b.shape[:-2]]
    check_broadcast("matmul", batches)
    patterns = [size_one_axes(s) for s in batches]
    key = ("matmul", a.dtype, a.ndim, b.ndim, *patterns)

    def source():
        (ba, bb), out = broadcast_dims(patterns, "B")
        da = ba + (["M", "K"] if a.ndim > 1 else ["K"])
        db = bb + (["K", "N"] if b.ndim > 1 else ["K"])
        result = out + (["M"] if a.ndim > 1 else []) + (["N"] if b.ndim > 1 else [])
        params = [("a", tensor_type(a.dtype, da)), ("b", tensor_type(b.dtype, db))]
        return definition("eager_matmul", params, tensor_type(a.dtype, result), "a @ b")

    return stdlib.kernel(key, source)(a, b)


def transpose(a, perm=None):
    """Axes permuted by `perm` (reversed by default)."""
    (a,) = operands("transpose", (a,))
    perm = tuple(range(a.ndim))[::-1] if perm is None else tuple(int(p) for p in perm)
    if sorted(perm) != list(range(a.ndim)):
        raise ValueError(f"adc.transpose: perm {list(perm)} is not a permutation of the {a.ndim} axes")
    key = ("transpose", a.dtype, perm)

    def source():
        dims = [f"D{i}" for i in range(a.ndim)]
        result = tensor_type(a.dtype, [dims[p] for p in perm])
        return definition("eager_transpose", [("x", tensor_type(a.dtype, dims))], result,
                          f"transpose(x, perm={list(perm)})")

    return stdlib.kernel(key, source)(a)


def reshape(tensor, shape):
    """The same elements in a new shape; one entry may be -1. Compiled per (input, output) shape."""
    (tensor,) = operands("reshape", (tensor,))
    try:
        new_shape = np.empty(tensor.shape, np.bool_).reshape(shape).shape if tensor.size else tuple(shape)
    except ValueError:
        raise ValueError(f"adc.reshape: cannot reshape a tensor of shape {tensor.shape} to {tuple(shape)}") from None
    key = ("reshape", tensor.dtype, tensor.shape, new_shape)

    def source():
        dims = [str(d) for d in new_shape]
        x = tensor_type(tensor.dtype, [str(d) for d in tensor.shape])
        return definition("eager_reshape", [("x", x)], tensor_type(tensor.dtype, dims),
                          f"reshape(x, [{', '.join(dims)}])")

    return stdlib.kernel(key, source)(tensor)


def concat(values, axis):
    """The tensors of `values` joined along `axis`; the other dims must agree."""
    values = operands("concat", list(values))
    rank = values[0].ndim
    axis = axes_of("concat", values[0], axis)[0]
    rest = {t.shape[:axis] + t.shape[axis + 1:] for t in values}
    if len(rest) != 1 or any(t.ndim != rank for t in values):
        raise ValueError(f"adc.concat: shapes {[t.shape for t in values]} differ outside axis {axis}")
    key = ("concat", values[0].dtype, rank, axis, len(values))

    def source():
        dims = [[f"A{j}" if i == axis else f"D{i}" for i in range(rank)] for j in range(len(values))]
        out = [" + ".join(f"A{j}" for j in range(len(values))) if i == axis else f"D{i}" for i in range(rank)]
        params = [(f"x{j}", tensor_type(values[0].dtype, d)) for j, d in enumerate(dims)]
        body = f"concat([{', '.join(p for p, _ in params)}], axis={axis})"
        return definition("eager_concat", params, tensor_type(values[0].dtype, out), body)

    return stdlib.kernel(key, source)(*values)


def stack(values, axis=0):
    """The tensors of `values` (all of one shape) stacked along a new axis."""
    values = operands("stack", list(values))
    if len({t.shape for t in values}) != 1:
        raise ValueError(f"adc.stack: shapes {[t.shape for t in values]} differ")
    rank = values[0].ndim
    if not -rank - 1 <= axis <= rank:
        raise ValueError(f"adc.stack: axis {axis} is out of range for tensors of rank {rank}")
    axis %= rank + 1
    key = ("stack", values[0].dtype, rank, axis, len(values))

    def source():
        dims = [f"D{i}" for i in range(rank)]
        params = [(f"x{j}", tensor_type(values[0].dtype, dims)) for j in range(len(values))]
        out = dims[:axis] + [str(len(values))] + dims[axis:]
        body = f"stack([{', '.join(p for p, _ in params)}], axis={axis})"
        return definition("eager_stack", params, tensor_type(values[0].dtype, out), body)

    return stdlib.kernel(key, source)(*values)


def _reflected(op):
    def reflected(self, other):
        return op(other, self)

    reflected.__name__ = f"r{op.__name__.rstrip('_')}"
    return reflected


def _rmatmul(self, other):
    return matmul(other, self)


def _eq(self, other):
    return False if other is None else equal(self, other)


def _ne(self, other):
    return True if other is None else not_equal(self, other)


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (getitem(self, i) for i in range(len(self)))


def _reshape_method(self, *shape):
    return reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)) else shape)


def _transpose_method(self, *axes):
    return transpose(self, axes[0] if len(axes) == 1 and axes[0] is not None and not isinstance(axes[0], (int, np.integer))
                     else axes or None)


OPERATORS = {
    "__add__": add, "__radd__": _reflected(add), "__sub__": subtract, "__rsub__": _reflected(subtract),
    "__mul__": multiply, "__rmul__": _reflected(multiply), "__truediv__": divide,
    "__rtruediv__": _reflected(divide), "__pow__": pow_, "__rpow__": _reflected(pow_),
    "__matmul__": matmul, "__rmatmul__": _rmatmul, "__neg__": negative, "__abs__": abs_,
    "__lt__": less, "__le__": less_equal, "__gt__": greater, "__ge__": greater_equal,
    "__eq__": _eq, "__ne__": _ne, "__getitem__": getitem, "__iter__": _iter,
}
# NumPy's array methods, recorded like the ops they name
METHODS = {
    "sum": reduce_sum, "mean": reduce_mean, "max": reduce_max, "min": reduce_min, "prod": reduce_prod,
    "reshape": _reshape_method, "transpose": _transpose_method, "T": property(transpose), "astype": cast,
}

for _cls in (Tensor, Variable):
    for _name, _fn in {**OPERATORS, **METHODS}.items():
        setattr(_cls, _name, _fn)
    _cls.__hash__ = None   # == is elementwise, as in TensorFlow: key dicts by id(t)
