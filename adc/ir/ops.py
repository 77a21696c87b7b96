"""The op registry: one `OpDef` per primitive, with its type rule, summary and example.

Type rules have one signature, `rule(operand_types, attrs, funcs) -> result_types`,
where `funcs` maps function names to `Func` (only `call` looks at it). A rule
raises `TypeRuleError` with an expected-vs-got message; the builder turns it
into a located `CompileError` and the verifier into a `VerifyError`.

Broadcasting is explicit: elementwise operands have identical types, and
`broadcast` expands a value to a larger shape. Every transformation of adc
(interpreter, lowering, and the derivative passes) has one rule per op here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from adc.ir.types import BOOL, I64, MAX_BYTES, Dim, DType, SymDim, TensorType, fits, num_elements


class TypeRuleError(Exception):
    """An op's operands or attributes do not fit its type rule."""


TypeRule = Callable[[Sequence[TensorType], Mapping[str, Any], Mapping[str, Any]], tuple[TensorType, ...]]


@dataclass(frozen=True)
class OpDef:
    name: str
    summary: str
    example: str
    type_rule: TypeRule
    arity: int | None                      # None: variadic
    attrs: tuple[str, ...] = ()
    traits: frozenset[str] = field(default_factory=frozenset)


OPS: dict[str, OpDef] = {}


def _register(name, summary, example, rule, arity, attrs=(), traits=()):
    OPS[name] = OpDef(name, summary, example, rule, arity, tuple(attrs), frozenset(traits))


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise TypeRuleError(message)


def _example(params: str, body: str, result: str) -> str:
    return f"func @example({params}) -> {result} {{\n{body}\n}}\n"


# ---------------------------------------------------------------- elementwise

def _unary_rule(kinds: str):
    def rule(types, attrs, funcs):
        (t,) = types
        if kinds == "float":
            _require(t.dtype.is_float, f"expected a float operand, got {t}")
        elif kinds == "bits":
            _require(not t.dtype.is_float, f"expected a bool or integer operand, got {t}")
        else:
            _require(t.dtype is not BOOL, f"expected a numeric operand, got {t}")
        return (t,)
    return rule


def _same_types(types) -> TensorType:
    first = types[0]
    for t in types[1:]:
        _require(t == first, f"operand types differ: {first} vs {t}")
    return first


def _binary_rule(kinds: str):
    def rule(types, attrs, funcs):
        t = _same_types(types)
        if kinds == "float":
            _require(t.dtype.is_float, f"expected float operands, got {t}")
        elif kinds == "numeric":
            _require(t.dtype is not BOOL, f"expected numeric operands, got {t}")
        elif kinds == "bits":
            _require(not t.dtype.is_float, f"expected bool or integer operands, got {t}")
        elif kinds == "compare":
            return (t.with_dtype(BOOL),)
        return (t,)
    return rule


UNARY_FLOAT = ("sin", "cos", "tan", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt",
               "tanh", "sigmoid", "round", "floor", "log2", "log10", "exp2", "cbrt", "sinh", "cosh",
               "asinh", "acosh", "atanh", "erf", "erfc", "lgamma", "digamma", "trigamma")
UNARY_NUMERIC = ("neg", "abs", "sign")
UNARY_BITS = ("bitwise_not",)
BINARY_NUMERIC = ("add", "sub", "mul", "minimum", "maximum", "mod", "floor_div")
BINARY_FLOAT = ("div", "pow", "atan2", "hypot")
BINARY_BITS = ("bitwise_and", "bitwise_or", "bitwise_xor")
COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
# x op y == y op x bit for bit (not maximum/minimum: which of -0.0 and 0.0 they return depends on the order)
COMMUTATIVE = ("add", "mul", "bitwise_and", "bitwise_or", "bitwise_xor", "eq", "ne")

_UNARY_SUMMARY = {
    "sin": "sine", "cos": "cosine", "tan": "tangent", "exp": "e**x", "log": "natural logarithm",
    "log1p": "log(1 + x), accurate near 0", "expm1": "exp(x) - 1, accurate near 0",
    "sqrt": "square root", "rsqrt": "1 / sqrt(x)", "tanh": "hyperbolic tangent",
    "sigmoid": "1 / (1 + exp(-x))", "round": "round half to even", "floor": "largest integer <= x",
    "log2": "base-2 logarithm", "log10": "base-10 logarithm", "exp2": "2**x", "cbrt": "cube root",
    "sinh": "hyperbolic sine", "cosh": "hyperbolic cosine", "asinh": "inverse hyperbolic sine",
    "acosh": "inverse hyperbolic cosine", "atanh": "inverse hyperbolic tangent", "erf": "error function",
    "erfc": "1 - erf(x), accurate where erf is near 1", "lgamma": "log |Gamma(x)|",
    "digamma": "psi(x), the derivative of lgamma", "trigamma": "psi'(x), the derivative of digamma",
    "neg": "-x", "abs": "|x|", "sign": "-1, 0 or 1 (0 for nan stays nan)",
    "bitwise_not": "~x: logical not of bools, bitwise not (-x - 1) of integers",
}
_BINARY_SUMMARY = {
    "add": "x + y", "sub": "x - y", "mul": "x * y", "div": "x / y", "pow": "x ** y",
    "atan2": "the angle of the point (y, x) = (first, second operand), in [-pi, pi], as np.arctan2",
    "hypot": "sqrt(x*x + y*y) without overflow or underflow",
    "minimum": "the smaller of x and y (nan if either is nan)",
    "maximum": "the larger of x and y (nan if either is nan)",
    "mod": "x % y with the sign of y, as np.mod (integers: 0 where y is 0)",
    "floor_div": "x // y, the floor of x / y, as np.floor_divide (integers: 0 where y is 0)",
    "bitwise_and": "x & y (logical and of bools)", "bitwise_or": "x | y (logical or of bools)",
    "bitwise_xor": "x ^ y (logical xor of bools)",
    "lt": "x < y", "le": "x <= y", "gt": "x > y", "ge": "x >= y", "eq": "x == y", "ne": "x != y",
}

def _unary_kind(name: str) -> str:
    return "float" if name in UNARY_FLOAT else "bits" if name in UNARY_BITS else "numeric"


for _name in UNARY_FLOAT + UNARY_NUMERIC + UNARY_BITS:
    _type = "bool[N]" if _name in UNARY_BITS else "f32[N]"
    _register(_name, f"elementwise {_UNARY_SUMMARY[_name]}",
              _example(f"%x: {_type}", f"  %0 = {_name} %x : {_type}\n  return %0", _type),
              _unary_rule(_unary_kind(_name)), 1, traits=("elementwise", "unary"))


def _binary_kind(name: str) -> str:
    kinds = {BINARY_NUMERIC: "numeric", BINARY_FLOAT: "float", BINARY_BITS: "bits", COMPARE: "compare"}
    return next(kind for names, kind in kinds.items() if name in names)


for _name in BINARY_NUMERIC + BINARY_FLOAT + BINARY_BITS + COMPARE:
    _kind = _binary_kind(_name)
    _operand = "bool[N]" if _kind == "bits" else "f32[N]"
    _result = "bool[N]" if _kind in ("compare", "bits") else "f32[N]"
    _register(_name, f"elementwise {_BINARY_SUMMARY[_name]} of two operands of one type",
              _example(f"%x: {_operand}, %y: {_operand}", f"  %0 = {_name} %x, %y : {_result}\n  return %0",
                       _result),
              _binary_rule(_kind), 2, traits=("elementwise", "binary") + (("compare",) if _kind == "compare" else ())
              + (("commutative",) if _name in COMMUTATIVE else ()))


def _select_rule(types, attrs, funcs):
    cond, a, b = types
    _require(cond.dtype is BOOL, f"expected a bool condition, got {cond}")
    t = _same_types([a, b])
    _require(cond.shape == t.shape, f"condition shape {cond} differs from operands {t}")
    return (t,)


_register("select", "elementwise `c ? x : y`",
          _example("%c: bool[N], %x: f32[N], %y: f32[N]",
                   "  %0 = select %c, %x, %y : f32[N]\n  return %0", "f32[N]"),
          _select_rule, 3, traits=("elementwise",))


def _convert_rule(types, attrs, funcs):
    (t,) = types
    _require(isinstance(attrs["dtype"], DType), f"`dtype` must be a dtype, got {attrs['dtype']!r}")
    return (t.with_dtype(attrs["dtype"]),)


_register("convert", "elementwise conversion to `dtype` (float to int truncates toward zero)",
          _example("%x: f32[N]", "  %0 = convert %x {dtype = f64} : f64[N]\n  return %0", "f64[N]"),
          _convert_rule, 1, ("dtype",), traits=("elementwise", "unary"))


def _stop_gradient_rule(types, attrs, funcs):
    return (types[0],)


_register("stop_gradient", "identity whose cotangent is zero",
          _example("%x: f32[N]", "  %0 = stop_gradient %x : f32[N]\n  return %0", "f32[N]"),
          _stop_gradient_rule, 1, traits=("elementwise", "unary"))


# ---------------------------------------------------------------- constants

def _constant_rule(types, attrs, funcs):
    value, dtype = attrs["value"], attrs["dtype"]
    _require(isinstance(value, (int, float, bool)), f"expected a number, got {value!r}")
    return (TensorType(dtype),)


_register("constant", "a scalar constant of `dtype`",
          _example("", "  %0 = constant {dtype = f32, value = 0.5} : f32\n  return %0", "f32"),
          _constant_rule, 0, ("dtype", "value"), traits=("elementwise", "source"))


def _iota_rule(types, attrs, funcs):
    shape, axis = tuple(attrs["shape"]), attrs["axis"]
    _require(0 <= axis < len(shape), f"axis {axis} out of range for rank {len(shape)}")
    return (TensorType(attrs["dtype"], shape),)


_register("iota", "the index along `axis` at each position of a `shape` tensor",
          _example("%x: f32[N]", "  %0 = iota {axis = 0, dtype = f32, shape = [N]} : f32[N]\n  return %0", "f32[N]"),
          _iota_rule, 0, ("axis", "dtype", "shape"), traits=("source",))


def _dim_rule(types, attrs, funcs):
    _require(isinstance(attrs["value"], (int, SymDim)), f"expected a dimension, got {attrs['value']!r}")
    return (TensorType(attrs["dtype"]),)


_register("dim", "the run-time value of a dimension expression, as a scalar of `dtype`",
          _example("%x: f32[N]", "  %0 = dim {dtype = f32, value = N} : f32\n  return %0", "f32"),
          _dim_rule, 0, ("dtype", "value"), traits=("elementwise", "source"))


# ---------------------------------------------------------------- shape ops

def _broadcast_rule(types, attrs, funcs):
    (t,) = types
    shape, dims = tuple(attrs["shape"]), tuple(attrs["dims"])
    _require(len(dims) == t.rank, f"`dims` has {len(dims)} entries for an operand of rank {t.rank}")
    _require(all(0 <= d < len(shape) for d in dims) and list(dims) == sorted(set(dims)),
             f"`dims` {list(dims)} must be increasing axes of the result (rank {len(shape)})")
    for src, dst in zip(t.shape, dims):
        _require(src == 1 or src == shape[dst],
                 f"cannot broadcast dimension {src} to {shape[dst]}")
    return (TensorType(t.dtype, shape),)


_register("broadcast", "expand to `shape`; operand axis i maps to result axis dims[i] (size 1 or equal)",
          _example("%x: f32[O], %y: f32[B,O]", "  %0 = broadcast %x {dims = [1], shape = [B,O]} : f32[B,O]\n  return %0",
                   "f32[B,O]"),
          _broadcast_rule, 1, ("dims", "shape"))


def _reshape_rule(types, attrs, funcs):
    (t,) = types
    shape = tuple(attrs["shape"])
    _require(num_elements(shape) == num_elements(t.shape),
             f"cannot reshape {t} to [{','.join(map(str, shape))}]: element counts differ")
    return (TensorType(t.dtype, shape),)


_register("reshape", "the same elements in row-major order, in a new shape",
          _example("%x: f32[B,H]", "  %0 = reshape %x {shape = [B*H]} : f32[B*H]\n  return %0", "f32[B*H]"),
          _reshape_rule, 1, ("shape",))


def _transpose_rule(types, attrs, funcs):
    (t,) = types
    perm = tuple(attrs["perm"])
    _require(sorted(perm) == list(range(t.rank)), f"`perm` {list(perm)} is not a permutation of rank {t.rank}")
    return (TensorType(t.dtype, tuple(t.shape[p] for p in perm)),)


_register("transpose", "permute axes: result axis i is operand axis perm[i]",
          _example("%x: f32[M,N]", "  %0 = transpose %x {perm = [1,0]} : f32[N,M]\n  return %0", "f32[N,M]"),
          _transpose_rule, 1, ("perm",))


def _static_le(a: Dim, b: Dim) -> bool:
    """True unless a > b is certain (symbolic cases are checked at call time)."""
    diff = b - a
    return not isinstance(diff, int) or diff >= 0


def _slice_rule(types, attrs, funcs):
    (t,) = types
    start, stop, step = (tuple(attrs[k]) for k in ("start", "stop", "step"))
    _require(len(start) == len(stop) == len(step) == t.rank,
             f"`start`, `stop`, `step` need {t.rank} entries each")
    shape = []
    for size, lo, hi, st in zip(t.shape, start, stop, step):
        _require(isinstance(st, int) and st >= 1, f"step {st} must be a positive integer")
        _require(_static_le(0, lo) and _static_le(lo, hi) and _static_le(hi, size),
                 f"slice {lo}:{hi} out of bounds for dimension {size}")
        extent = hi - lo
        if st == 1:
            shape.append(extent)
        else:
            _require(isinstance(extent, int), f"a step of {st} needs a static extent, got {extent}")
            shape.append(-(-extent // st))
    return (TensorType(t.dtype, tuple(shape)),)


_register("slice", "elements start:stop:step along every axis (static bounds)",
          _example("%x: f32[N]", "  %0 = slice %x {start = [1], step = [1], stop = [N]} : f32[N-1]\n  return %0",
                   "f32[N-1]"),
          _slice_rule, 1, ("start", "step", "stop"))


def _concat_rule(types, attrs, funcs):
    _require(len(types) >= 1, "expected at least one operand")
    axis, first = attrs["axis"], types[0]
    _require(0 <= axis < first.rank, f"axis {axis} out of range for rank {first.rank}")
    total: Dim = 0
    for t in types:
        _require(t.dtype == first.dtype and t.rank == first.rank, f"operand types differ: {first} vs {t}")
        _require(all(a == b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis),
                 f"operand shapes differ off axis {axis}: {first} vs {t}")
        total = total + t.shape[axis]
    shape = list(first.shape)
    shape[axis] = total
    return (TensorType(first.dtype, tuple(shape)),)


_register("concat", "join operands along `axis`",
          _example("%x: f32[N], %y: f32[M]", "  %0 = concat %x, %y {axis = 0} : f32[M+N]\n  return %0",
                   "f32[M+N]"),
          _concat_rule, None, ("axis",))


def _pad_rule(types, attrs, funcs):
    t, value = types
    low, high = tuple(attrs["low"]), tuple(attrs["high"])
    _require(value == TensorType(t.dtype), f"padding value must be a {t.dtype} scalar, got {value}")
    _require(len(low) == len(high) == t.rank, f"`low` and `high` need {t.rank} entries each")
    _require(all(isinstance(n, int) and n >= 0 for n in low + high), "padding widths must be non-negative ints")
    return (TensorType(t.dtype, tuple(d + lo + hi for d, lo, hi in zip(t.shape, low, high))),)


_register("pad", "surround with `low`/`high` copies of a scalar value along each axis",
          _example("%x: f32[N], %v: f32", "  %0 = pad %x, %v {high = [2], low = [1]} : f32[N+3]\n  return %0",
                   "f32[N+3]"),
          _pad_rule, 2, ("high", "low"))


# ---------------------------------------------------------------- reductions

def _reduce_rule(types, attrs, funcs):
    (t,) = types
    axes = tuple(attrs["axes"])
    _require(list(axes) == sorted(set(axes)) and all(0 <= a < t.rank for a in axes),
             f"`axes` {list(axes)} must be increasing axes of rank {t.rank}")
    _require(t.dtype is not BOOL, f"cannot reduce {t}")
    return (TensorType(t.dtype, tuple(d for i, d in enumerate(t.shape) if i not in axes)),)


REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod")
for _name, _what in zip(REDUCTIONS, ("sum", "maximum (-inf when empty)", "minimum (inf when empty)", "product")):
    _register(_name, f"{_what} over `axes`",
              _example("%x: f32[B,N]", f"  %0 = {_name} %x {{axes = [1]}} : f32[B]\n  return %0", "f32[B]"),
              _reduce_rule, 1, ("axes",), traits=("reduction",))


def _arg_reduce_rule(types, attrs, funcs):
    # `axes` names one axis, so the rules keyed on the "reduction" trait (batching, example axes) apply
    (t,) = types
    axes = tuple(attrs["axes"])
    _require(len(axes) == 1 and 0 <= axes[0] < t.rank, f"`axes` must name one axis of rank {t.rank}, got {list(axes)}")
    _require(t.dtype is not BOOL, f"cannot reduce {t}")
    return (TensorType(I64, tuple(d for i, d in enumerate(t.shape) if i != axes[0])),)


ARG_REDUCTIONS = ("argmax", "argmin")
for _name, _what in zip(ARG_REDUCTIONS, ("maximum", "minimum")):
    _register(_name, f"the i64 index of the first {_what} along the one axis in `axes` (of the first nan, "
              "if any; 0 when the axis is empty)",
              _example("%x: f32[B,N]", f"  %0 = {_name} %x {{axes = [1]}} : i64[B]\n  return %0", "i64[B]"),
              _arg_reduce_rule, 1, ("axes",), traits=("reduction",))


# ---------------------------------------------------------------- scans

def _scan_rule(types, attrs, funcs):
    (t,) = types
    axis = attrs["axis"]
    _require(isinstance(axis, int) and not isinstance(axis, bool) and 0 <= axis < t.rank,
             f"axis {axis!r} out of range for {t}")
    _require(all(isinstance(attrs[k], bool) for k in ("exclusive", "reverse")),
             "`exclusive` and `reverse` must be true or false")
    _require(t.dtype is not BOOL, f"cannot scan {t}")
    return (t,)


SCANS = ("cumsum", "cumprod")
for _name, _what in zip(SCANS, ("sums", "products")):
    _register(_name, f"running {_what} along `axis` (np.{_name}): element k combines elements 0..k, or 0..k-1 "
              "when `exclusive` (the identity first); `reverse` runs from the end",
              _example("%x: f32[B,N]", f"  %0 = {_name} %x {{axis = 1, exclusive = false, reverse = false}} : f32[B,N]"
                       "\n  return %0", "f32[B,N]"),
              _scan_rule, 1, ("axis", "exclusive", "reverse"), traits=("scan",))


def _matmul_rule(types, attrs, funcs):
    a, b = types
    _require(a.dtype == b.dtype and a.dtype.is_float, f"expected float operands of one dtype, got {a} and {b}")
    _require(a.rank == b.rank >= 2, f"expected operands of one rank >= 2, got {a} and {b}")
    _require(a.shape[:-2] == b.shape[:-2], f"batch dimensions differ: {a} and {b}")
    _require(a.shape[-1] == b.shape[-2], f"contracted dimensions differ: {a} and {b}")
    return (TensorType(a.dtype, a.shape[:-1] + b.shape[-1:]),)


_register("matmul", "matrix product over the last two axes, batched over the leading ones",
          _example("%x: f32[B,I], %w: f32[I,O]", "  %0 = matmul %x, %w : f32[B,O]\n  return %0", "f32[B,O]"),
          _matmul_rule, 2)


# ---------------------------------------------------------------- indexing by integer tensors
#
# Index rule of gather and scatter_add: an index i into an axis of size n reads position
# i + n when i < 0 (once: -1 is the last), then clamped to [0, n-1]; an axis of size 0 is
# never read (gather gives 0, scatter_add drops the update). Native code never reads or
# writes out of bounds, and the interpreter applies the same rule.

def gathered_shape(x: TensorType, indices: TensorType, axis: int) -> tuple[Dim, ...]:
    """np.take's shape: x's axes before `axis`, then the indices' axes, then x's axes after."""
    return x.shape[:axis] + indices.shape + x.shape[axis + 1:]


def _check_indexing(x: TensorType, indices: TensorType, axis) -> None:
    _require(isinstance(axis, int) and not isinstance(axis, bool) and 0 <= axis < x.rank,
             f"axis {axis!r} out of range for {x}")
    _require(indices.dtype.is_int, f"indices must be an i32 or i64 tensor, got {indices}")


def _gather_rule(types, attrs, funcs):
    x, indices = types
    _check_indexing(x, indices, attrs["axis"])
    return (TensorType(x.dtype, gathered_shape(x, indices, attrs["axis"])),)


_register("gather", "np.take(x, indices, axis): the slices of x along `axis` at each index (index rule above)",
          _example("%x: f32[N,M], %i: i64[B]", "  %0 = gather %x, %i {axis = 0} : f32[B,M]\n  return %0",
                   "f32[B,M]"),
          _gather_rule, 2, ("axis",))


def _scatter_add_rule(types, attrs, funcs):
    _require(types[0].dtype is not BOOL, f"cannot add into {types[0]}")
    return _scatter_rule(types, attrs, funcs)


def _scatter_rule(types, attrs, funcs):
    base, indices, updates = types
    axis = attrs["axis"]
    _check_indexing(base, indices, axis)
    expected = TensorType(base.dtype, gathered_shape(base, indices, axis))
    _require(updates == expected, f"updates must be {expected} ({base} indexed by {indices} along axis {axis}), "
                                  f"got {updates}")
    return (base,)


_register("scatter_add", "base with each slice of updates added at its index along `axis` "
          "(np.add.at; duplicates accumulate; index rule above)",
          _example("%b: f32[N,M], %i: i64[B], %u: f32[B,M]",
                   "  %0 = scatter_add %b, %i, %u {axis = 0} : f32[N,M]\n  return %0", "f32[N,M]"),
          _scatter_add_rule, 3, ("axis",))
_register("scatter", "base with each slice of updates written at its index along `axis`; of duplicate "
          "indices the last in row-major order of the indices wins (index rule above)",
          _example("%b: f32[N,M], %i: i64[B], %u: f32[B,M]",
                   "  %0 = scatter %b, %i, %u {axis = 0} : f32[N,M]\n  return %0", "f32[N,M]"),
          _scatter_rule, 3, ("axis",))


# ---------------------------------------------------------------- calls

def bind_dims(params: Sequence[TensorType], args: Sequence[TensorType]) -> dict[str, Dim]:
    """Bind a callee's dimension symbols to the caller's dimensions, checking consistency."""
    _require(len(params) == len(args), f"expected {len(params)} arguments, got {len(args)}")
    env: dict[str, Dim] = {}
    for i, (p, a) in enumerate(zip(params, args)):
        _require(p.dtype == a.dtype and p.rank == a.rank, f"argument {i + 1}: expected {p}, got {a}")
        for pd, ad in zip(p.shape, a.shape):
            if isinstance(pd, SymDim) and pd.is_symbol:
                (name,) = pd.symbols
                _require(env.setdefault(name, ad) == ad,
                         f"argument {i + 1}: dimension {name} is {env[name]} elsewhere but {ad} here")
            else:
                _require(pd == ad, f"argument {i + 1}: expected {p}, got {a}")
    return env


def substitute(d: Dim, env: Mapping[str, Dim]) -> Dim:
    return d.evaluate(env) if isinstance(d, SymDim) else d


def _call_rule(types, attrs, funcs):
    callee = funcs.get(attrs["callee"])
    _require(callee is not None, f"unknown function @{attrs['callee']}")
    env = bind_dims(callee.param_types, types)
    return tuple(TensorType(t.dtype, tuple(substitute(d, env) for d in t.shape)) for t in callee.result_types)


_register("call", "call another function of the module; its dimension symbols bind to the arguments'",
          "func @sq(%x: f32[N]) -> f32[N] {\n  %0 = mul %x, %x : f32[N]\n  return %0\n}\n\n"
          "func @example(%y: f32[M]) -> f32[M] {\n  %0 = call %y {callee = @sq} : f32[M]\n  return %0\n}\n",
          _call_rule, None, ("callee",))


def _callee(funcs, attrs, key: str):
    func = funcs.get(attrs[key])
    _require(func is not None, f"unknown function @{attrs[key]}")
    return func


def _custom_gradient_rule(types, attrs, funcs):
    # results: the forward's (k primal results, then the values saved for the backward);
    # the backward takes (inputs..., saved..., cotangents of the k results...) -> one cotangent per input
    forward, backward, k = _callee(funcs, attrs, "forward"), _callee(funcs, attrs, "backward"), attrs["results"]
    results = forward.result_types
    _require(isinstance(k, int) and 1 <= k <= len(results), f"`results` must be in 1..{len(results)}, got {k!r}")
    expected = forward.param_types + results[k:] + results[:k]
    _require(backward.param_types == expected and backward.result_types == forward.param_types,
             f"@{backward.name} must map ({', '.join(map(str, expected))}) to "
             f"({', '.join(map(str, forward.param_types))}), got {backward.signature()}")
    return _call_rule(types, {"callee": attrs["forward"]}, funcs)


_register("custom_gradient", "the results of `forward`, differentiated by `backward` instead of `forward`'s ops",
          "func @round_fwd(%x: f32) -> f32 {\n  %0 = round %x : f32\n  return %0\n}\n\n"
          "func @round_bwd(%x: f32, %dy: f32) -> f32 {\n  return %dy\n}\n\n"
          "func @example(%y: f32) -> f32 {\n"
          "  %0 = custom_gradient %y {backward = @round_bwd, forward = @round_fwd, results = 1} : f32\n  return %0\n}\n",
          _custom_gradient_rule, None, ("backward", "forward", "results"))


def _extern_call_rule(types, attrs, funcs):
    # elementwise C function `symbol` of operands of one float type, defined in the shared object
    # `library` ("" for libm and the process); `gradient` is [] or [@g] with
    # g(x_1..x_n, ct) -> (dx_1..dx_n) on scalars of that dtype
    _require(isinstance(attrs["symbol"], str) and attrs["symbol"].isidentifier(),
             f"`symbol` must be a C identifier, got {attrs['symbol']!r}")
    _require(isinstance(attrs["library"], str), f"`library` must be a string, got {attrs['library']!r}")
    _require(len(types) >= 1, "expected at least one operand")
    t = _same_types(types)
    _require(t.dtype.is_float, f"expected float operands, got {t}")
    gradient = tuple(attrs["gradient"])
    _require(len(gradient) <= 1, f"`gradient` names at most one function, got {len(gradient)}")
    for name in gradient:
        g = _callee(funcs, {"gradient": name}, "gradient")
        scalar = TensorType(t.dtype)
        _require(g.param_types == (scalar,) * (len(types) + 1) and g.result_types == (scalar,) * len(types),
                 f"@{name} must map {len(types) + 1} {t.dtype} scalars to {len(types)}, got {g.signature()}")
    return (t,)


_register("extern_call", "the C function `symbol` of shared object `library` (\"\": libm or the process) applied "
          "elementwise; `gradient` is its VJP, when one is attached",
          _example("%x: f64[N]", '  %0 = extern_call %x {gradient = [], library = "", symbol = "erf"} : f64[N]\n'
                   '  return %0', "f64[N]"),
          _extern_call_rule, None, ("gradient", "library", "symbol"), traits=("elementwise",))


# ---------------------------------------------------------------- control flow
#
# Structured control flow, with each region a function of the module named by an attribute
# (XLA's While and Conditional do the same): every pass that works on functions works inside
# regions, and a region's IR prints, parses and verifies like any function. A region function
# shares its parent's dimension symbols: its parameters have exactly the types of the op's
# operands, and symbols its parameters do not bind are the parent's (Func.free_symbols).

I64_SCALAR = TensorType(I64)
BOOL_SCALAR = TensorType(BOOL)


def _signature_text(types) -> str:
    return f"({', '.join(map(str, types))})"


def _check_region(funcs, attrs, key: str, params: Sequence[TensorType], results: Sequence[TensorType] | None):
    """The region function `attrs[key]`, checked to take `params` (and return `results`)."""
    region = _callee(funcs, attrs, key)
    _require(region.param_types == tuple(params),
             f"@{region.name} ({key}) must take {_signature_text(params)}, got {region.signature()}")
    if results is not None:
        _require(region.result_types == tuple(results),
                 f"@{region.name} ({key}) must return {_signature_text(results)}, got {region.signature()}")
    return region


def _carried_count(attrs, operands: Sequence[TensorType]) -> int:
    k = attrs["carried"]
    _require(isinstance(k, int) and not isinstance(k, bool) and 0 <= k <= len(operands),
             f"`carried` must be in 0..{len(operands)}, got {k!r}")
    return k


def _loop_operands(types, attrs) -> tuple[tuple[TensorType, ...], int]:
    # operands: the trip count, the k carried values' initial values, then the captured values
    _require(len(types) >= 1 and types[0] == I64_SCALAR, f"the trip count must be an i64 scalar, got "
                                                         f"{types[0] if types else 'nothing'}")
    operands = tuple(types[1:])
    return operands, _carried_count(attrs, operands)


def _for_rule(types, attrs, funcs):
    # body(iteration, carried..., captured...) -> carried...; `checkpoint` is how reverse mode
    # stores the carried values: 0 (the default policy), or every k-th state for k >= 1
    operands, k = _loop_operands(types, attrs)
    _require(isinstance(attrs["checkpoint"], int) and attrs["checkpoint"] >= 0,
             f"`checkpoint` must be 0 (the default policy) or a segment length k >= 1, got {attrs['checkpoint']!r}")
    _check_region(funcs, attrs, "body", (I64_SCALAR,) + operands, operands[:k])
    return operands[:k]


_register("for", "run `body` for iterations 0 .. count-1 (none when count <= 0), threading the `carried` "
          "values from one iteration to the next; the other operands are read by every iteration",
          "func @step(%i: i64, %acc: f32[N], %x: f32[N]) -> f32[N] {\n  %0 = add %acc, %x : f32[N]\n"
          "  return %0\n}\n\n"
          "func @example(%n: i64, %x: f32[N]) -> f32[N] {\n"
          "  %0 = for %n, %x, %x {body = @step, carried = 1, checkpoint = 0} : f32[N]\n  return %0\n}\n",
          _for_rule, None, ("body", "carried", "checkpoint"), traits=("control_flow",))


def _scan_rule(types, attrs, funcs):
    # a for loop whose body also returns values stacked along a new axis of `length`, a dimension
    # symbol the op binds to the trip count (clamped at 0); the axis is at `axis` of each stacked value.
    # body(iteration, carried..., captured...) -> (carried..., per-iteration values...)
    operands, k = _loop_operands(types, attrs)
    length, axis = attrs["length"], attrs["axis"]
    _require(isinstance(length, str) and length.isidentifier(), f"`length` must name a dimension, got {length!r}")
    body = _check_region(funcs, attrs, "body", (I64_SCALAR,) + operands, None)
    _require(body.result_types[:k] == operands[:k],
             f"@{body.name} (body) must return the carried {_signature_text(operands[:k])} first, got {body.signature()}")
    rows = body.result_types[k:]
    _require(isinstance(axis, int) and all(0 <= axis <= r.rank for r in rows),
             f"`axis` {axis!r} is out of range for the stacked values {_signature_text(rows)}")
    size = SymDim.symbol(length)
    return operands[:k] + tuple(r.with_shape(r.shape[:axis] + (size,) + r.shape[axis:]) for r in rows)


_register("scan", "a for loop that also stacks the values its body returns after the carried ones, along a "
          "new axis of `length`, a dimension symbol it binds to the trip count (what reverse mode stores)",
          "func @step(%i: i64, %acc: f32[N], %x: f32[N]) -> (f32[N], f32[N]) {\n  %0 = add %acc, %x : f32[N]\n"
          "  return %0, %acc\n}\n\n"
          "func @example(%n: i64, %x: f32[N]) -> f32[N] {\n"
          "  %0, %1 = scan %n, %x, %x {axis = 0, body = @step, carried = 1, length = \"L\"} : f32[N], f32[L,N]\n"
          "  return %0\n}\n",
          _scan_rule, None, ("axis", "body", "carried", "length"), traits=("control_flow",))


def _while_rule(types, attrs, funcs):
    # operands: the k carried values' initial values, then the captured values;
    # cond(carried..., captured...) -> bool, body(carried..., captured...) -> carried...
    k = _carried_count(attrs, types)
    _check_region(funcs, attrs, "cond", types, (BOOL_SCALAR,))
    _check_region(funcs, attrs, "body", types, types[:k])
    return tuple(types[:k])


_register("while", "run `body` on the `carried` values while `cond` holds; the other operands are read "
          "by every iteration",
          "func @below(%x: f32, %limit: f32) -> bool {\n  %0 = lt %x, %limit : bool\n  return %0\n}\n\n"
          "func @increment(%x: f32, %limit: f32) -> f32 {\n  %0 = constant {dtype = f32, value = 1.0} : f32\n"
          "  %1 = add %x, %0 : f32\n  return %1\n}\n\n"
          "func @example(%x: f32, %limit: f32) -> f32 {\n"
          "  %0 = while %x, %limit {body = @increment, carried = 1, cond = @below} : f32\n  return %0\n}\n",
          _while_rule, None, ("body", "carried", "cond"), traits=("control_flow",))


def _if_rule(types, attrs, funcs):
    # operands: the condition, then the values both branches read; each branch takes those values
    _require(len(types) >= 1 and types[0] == BOOL_SCALAR,
             f"the condition must be a bool scalar, got {types[0] if types else 'nothing'}")
    then = _check_region(funcs, attrs, "then_branch", types[1:], None)
    _check_region(funcs, attrs, "else_branch", types[1:], then.result_types)
    return then.result_types


_register("if", "the results of `then_branch` when the condition holds, else of `else_branch`; only the "
          "branch taken runs",
          "func @twice(%x: f32[N]) -> f32[N] {\n  %0 = add %x, %x : f32[N]\n  return %0\n}\n\n"
          "func @same(%x: f32[N]) -> f32[N] {\n  return %x\n}\n\n"
          "func @example(%c: bool, %x: f32[N]) -> f32[N] {\n"
          "  %0 = if %c, %x {else_branch = @same, then_branch = @twice} : f32[N]\n  return %0\n}\n",
          _if_rule, None, ("else_branch", "then_branch"), traits=("control_flow",))


def infer_types(name: str, operand_types: Sequence[TensorType], attrs: Mapping[str, Any],
                funcs: Mapping[str, Any]) -> tuple[TensorType, ...]:
    """Run the type rule of op `name`; raises TypeRuleError on misuse."""
    opdef = OPS.get(name)
    if opdef is None:
        raise TypeRuleError(f"unknown op '{name}'")
    if opdef.arity is not None and len(operand_types) != opdef.arity:
        raise TypeRuleError(f"'{name}' takes {opdef.arity} operands, got {len(operand_types)}")
    missing = [a for a in opdef.attrs if a not in attrs]
    extra = [a for a in attrs if a not in opdef.attrs]
    if missing or extra:
        raise TypeRuleError(f"'{name}' needs attributes {list(opdef.attrs)}, got {sorted(attrs)}")
    types = opdef.type_rule(operand_types, attrs, funcs)
    for t in types:
        _require(fits(t), f"{t} has more than {MAX_BYTES} bytes")
    return types

