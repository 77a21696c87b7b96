"""The VJP rule of every op: the table the adjoint pass (adc/passes/adjoint.py) runs.

A rule turns the cotangents of an op's results into cotangents of its operands,
emitting ordinary IR with the builder, so the adjoint of an adjoint is a second
derivative. Every op a rule emits has a rule here too; every op of
`adc.ir.ops.OPS` has a rule or is listed in `NON_DIFFERENTIABLE`.

    %0 = sin %x : f64[N]          ct of %0 = %ct    ==>    %1 = cos %x : f64[N]
                                                            %2 = mul %ct, %1 : f64[N]     (ct of %x)
"""
from __future__ import annotations

import math
from typing import Callable

from adc.errors import CompileError
from adc.ir.builder import Builder, full
from adc.ir.core import Func, FuncRef, Module, Op, Value
from adc.ir.ops import OPS
from adc.ir.types import DType, TensorType, num_elements
from adc.passes.adjoint_control_flow import for_adjoint, if_adjoint, scan_adjoint, while_adjoint
from adc.passes.inline import inline_func

# adjoint_rules[op_name](b, op, cts) -> one cotangent (or None) per operand of `op`
#   b:   the builder of the VJP function, stamped with op.loc by the pass
#   op:  the primal op; its operands and results are values of the VJP function
#   cts: the cotangents of op's results; None is a symbolic zero (not all are None)
# A returned None is "no contribution": the pass adds nothing for that operand.
AdjointRule = Callable[[Builder, Op, tuple["Value | None", ...]], tuple["Value | None", ...]]
adjoint_rules: dict[str, AdjointRule] = {}


def _scaled(b: Builder, ct: Value, value: float, x: Value) -> Value:
    """ct * value * x."""
    return b.op("mul", ct, b.op("mul", full(b, value, x.type), x))


# ---------------------------------------------------------------- no contribution

NON_DIFFERENTIABLE = ("sign", "round", "floor", "floor_div", "lt", "le", "gt", "ge", "eq", "ne",
                      "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
                      "stop_gradient", "constant", "iota", "dim")


def zero_adjoint(b, op, cts):
    # piecewise constant, a constant, or stop_gradient: no cotangent for any operand
    return (None,) * len(op.operands)


for _name in NON_DIFFERENTIABLE:
    adjoint_rules[_name] = zero_adjoint


def call_adjoint(b, op, cts):
    raise CompileError(f"the adjoint pass met a call of @{op.attrs['callee']}: inline calls first",
                       op.loc)


adjoint_rules["call"] = call_adjoint


# ---------------------------------------------------------------- arithmetic

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


# ---------------------------------------------------------------- elementwise functions

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


# f: f' as an op (trigamma has no derivative: lgamma is differentiable twice, digamma once)
DERIVATIVE_OPS = {"sin": "cos", "sinh": "cosh", "cosh": "sinh", "lgamma": "digamma", "digamma": "trigamma"}
for _name, _derivative in DERIVATIVE_OPS.items():
    adjoint_rules[_name] = _times(_derivative)


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


# ---------------------------------------------------------------- structure

def _kept_axes(rank: int, axes) -> list[int]:
    return [i for i in range(rank) if i not in axes]


def broadcast_adjoint(b, op, cts):
    # d broadcast(x) = ct summed over the new and the stretched size-1 axes, reshaped to x
    x, shape, dims = op.operands[0], op.attrs["shape"], op.attrs["dims"]
    kept = [d for d, size in zip(dims, x.type.shape) if size == shape[d]]
    ct = cts[0]
    if len(kept) < len(shape):
        ct = b.op("reduce_sum", ct, axes=_kept_axes(len(shape), kept))
    return (ct if ct.type == x.type else b.op("reshape", ct, shape=x.type.shape),)


adjoint_rules["broadcast"] = broadcast_adjoint


def reshape_adjoint(b, op, cts):
    # d reshape(x) = ct reshaped back
    return (b.op("reshape", cts[0], shape=op.operands[0].type.shape),)


adjoint_rules["reshape"] = reshape_adjoint


def transpose_adjoint(b, op, cts):
    # d transpose(x, p) = transpose(ct, p⁻¹)
    perm = op.attrs["perm"]
    inverse = sorted(range(len(perm)), key=lambda i: perm[i])
    return (b.op("transpose", cts[0], perm=inverse),)


adjoint_rules["transpose"] = transpose_adjoint


def _zeros(b: Builder, like: Value, axis: int, extent) -> Value:
    shape = list(like.type.shape)
    shape[axis] = extent
    return full(b, 0.0, like.type.with_shape(shape))


def _pad_zeros(b: Builder, v: Value, low, high) -> Value:
    """v surrounded by zeros: `pad` for static widths, `concat` of zero blocks for symbolic ones."""
    static = [isinstance(lo, int) and isinstance(hi, int) for lo, hi in zip(low, high)]
    low_static = [lo if s else 0 for lo, s in zip(low, static)]
    high_static = [hi if s else 0 for hi, s in zip(high, static)]
    if any(low_static) or any(high_static):
        zero = b.op("constant", dtype=v.type.dtype, value=0.0)
        v = b.op("pad", v, zero, low=low_static, high=high_static)
    for axis in (i for i, s in enumerate(static) if not s):
        parts = [_zeros(b, v, axis, low[axis])] if low[axis] != 0 else []
        parts += [v] + ([_zeros(b, v, axis, high[axis])] if high[axis] != 0 else [])
        v = b.op("concat", *parts, axis=axis)
    return v


def _spread(b: Builder, ct: Value, axis: int, step: int, extent: int) -> Value:
    """ct[k] moved to position k*step of a length-`extent` axis, zeros between (static sizes)."""
    shape = list(ct.type.shape)
    count = shape[axis]
    split = b.op("reshape", ct, shape=shape[:axis + 1] + [1] + shape[axis + 1:])
    zero = b.op("constant", dtype=ct.type.dtype, value=0.0)
    high = [0] * len(split.type.shape)
    high[axis + 1] = step - 1
    padded = b.op("pad", split, zero, low=[0] * len(high), high=high)
    flat = b.op("reshape", padded, shape=shape[:axis] + [count * step] + shape[axis + 1:])
    stop = list(flat.type.shape)
    stop[axis] = extent
    return b.op("slice", flat, start=[0] * len(shape), stop=stop, step=[1] * len(shape))


def slice_adjoint(b, op, cts):
    # d x[lo:hi:st] = ct scattered into zeros shaped like x (every st-th place when st > 1)
    x, start, stop = op.operands[0], op.attrs["start"], op.attrs["stop"]
    ct = cts[0]
    for axis, step in enumerate(op.attrs["step"]):
        if step > 1:
            ct = _spread(b, ct, axis, step, stop[axis] - start[axis])
    return (_pad_zeros(b, ct, start, [size - hi for size, hi in zip(x.type.shape, stop)]),)


adjoint_rules["slice"] = slice_adjoint


def concat_adjoint(b, op, cts):
    # d concat(x1..xn) = the slice of ct where each xi landed
    ct, axis = cts[0], op.attrs["axis"]
    rank, offset, pieces = ct.type.rank, 0, []
    for x in op.operands:
        start, stop = [0] * rank, list(ct.type.shape)
        start[axis], stop[axis] = offset, offset + x.type.shape[axis]
        pieces.append(b.op("slice", ct, start=start, stop=stop, step=[1] * rank))
        offset = stop[axis]
    return tuple(pieces)


adjoint_rules["concat"] = concat_adjoint


def _sum_all(b: Builder, v: Value) -> Value:
    return b.op("reduce_sum", v, axes=list(range(v.type.rank))) if v.type.rank else v


def pad_adjoint(b, op, cts):
    # d pad(x, v) = the slice of ct over x, and sum(ct) - sum(that slice) for the padding value
    ct, (x, _) = cts[0], op.operands
    low = op.attrs["low"]
    inner = b.op("slice", ct, start=low, stop=[lo + d for lo, d in zip(low, x.type.shape)],
                 step=[1] * x.type.rank)
    return (inner, b.op("sub", _sum_all(b, ct), _sum_all(b, inner)))


adjoint_rules["pad"] = pad_adjoint


# ---------------------------------------------------------------- indexing by integer tensors

def gather_adjoint(b, op, cts):
    # d take(x, i) = ct added into zeros like x at the indices (duplicates accumulate); none for i
    x, indices = op.operands
    return (b.op("scatter_add", full(b, 0.0, x.type), indices, cts[0], axis=op.attrs["axis"]), None)


adjoint_rules["gather"] = gather_adjoint


def scatter_add_adjoint(b, op, cts):
    # d scatter_add(base, i, u) = ct, none, take(ct, i)
    ct, indices = cts[0], op.operands[1]
    return (ct, None, b.op("gather", ct, indices, axis=op.attrs["axis"]))


adjoint_rules["scatter_add"] = scatter_add_adjoint


def scatter_adjoint(b, op, cts):
    # d scatter(base, i, u): the base's is ct with the written slices zeroed; an update's is ct at its
    # index when it is the slice that stayed (the last of its duplicates), else 0; none for i
    base, indices, updates = op.operands
    ct, axis = cts[0], op.attrs["axis"]
    zeros = full(b, 0.0, updates.type)
    base_ct, taken = b.op("scatter", ct, indices, zeros, axis=axis), b.op("gather", ct, indices, axis=axis)
    if num_elements(indices.type.shape) == 1:       # one slice written (y[t] = x): it stays
        return base_ct, None, taken
    stayed = _last_writers(b, indices, base.type.shape[axis], updates.type, axis)
    return base_ct, None, b.op("select", stayed, taken, zeros)


def _last_writers(b: Builder, indices: Value, n, updates: TensorType, axis: int) -> Value:
    """True at the slices of `updates` a scatter along `axis` keeps: each index's position in row-major
    order, scattered into n slots, reads back as itself only for the last of its duplicates."""
    count = num_elements(indices.type.shape)
    positions = b.op("reshape", b.op("iota", axis=0, dtype=DType.i64, shape=(count,)), shape=indices.type.shape)
    last = b.op("scatter", full(b, -1, TensorType(DType.i64, (n,))), indices, positions, axis=0)
    stayed = b.op("eq", b.op("gather", last, indices, axis=0), positions)
    return b.op("broadcast", stayed, dims=tuple(range(axis, axis + indices.type.rank)), shape=updates.shape)


adjoint_rules["scatter"] = scatter_adjoint


# ---------------------------------------------------------------- reductions and matmul

def _unreduce(b: Builder, op: Op, v: Value) -> Value:
    """A value of the reduction's result shape, broadcast back over the reduced axes."""
    x = op.operands[0]
    return b.op("broadcast", v, dims=_kept_axes(x.type.rank, op.attrs["axes"]), shape=x.type.shape)


def reduce_sum_adjoint(b, op, cts):
    # d sum(x) = ct broadcast back
    return (_unreduce(b, op, cts[0]),)


adjoint_rules["reduce_sum"] = reduce_sum_adjoint


def reduce_max_adjoint(b, op, cts):
    # d max(x) = ct*(x == y)/count of ties: tied extrema share the cotangent (TensorFlow's convention)
    x = op.operands[0]
    ties = b.op("convert", b.op("eq", x, _unreduce(b, op, op.result)), dtype=x.type.dtype)
    count = b.op("reduce_sum", ties, axes=op.attrs["axes"])
    return (b.op("mul", _unreduce(b, op, b.op("div", cts[0], count)), ties),)


adjoint_rules["reduce_max"] = reduce_max_adjoint
adjoint_rules["reduce_min"] = reduce_max_adjoint      # d min(x): the same rule, ties at the minimum


def reduce_prod_adjoint(b, op, cts):
    # d prod(x) = ct*y/x (nan where an element is exactly 0)
    return (b.op("div", _unreduce(b, op, b.op("mul", cts[0], op.result)), op.operands[0]),)


adjoint_rules["reduce_prod"] = reduce_prod_adjoint


# argmax and argmin give i64 indices, piecewise constant: no cotangent
for _name in ("argmax", "argmin"):
    adjoint_rules[_name] = zero_adjoint


# ---------------------------------------------------------------- scans

def _scan(b: Builder, name: str, x: Value, op: Op, flip: bool = False) -> Value:
    """`name` along op's axis, exclusive as op, in op's direction or (flip) the opposite one."""
    return b.op(name, x, axis=op.attrs["axis"], exclusive=op.attrs["exclusive"], reverse=op.attrs["reverse"] != flip)


def cumsum_adjoint(b, op, cts):
    # d cumsum(x) = cumsum(ct) run the other way: x_j reaches every y_i scanned after it
    return (_scan(b, "cumsum", cts[0], op, flip=True),)


adjoint_rules["cumsum"] = cumsum_adjoint


def cumprod_zeros(b: Builder, op: Op) -> tuple[Value, Value, Value, Value]:
    """(x == 0, the first zero in scan order, x with its zeros replaced by 1, the products of the
    scan with the first zero replaced by 1): what keeps the derivatives of cumprod exact at zeros.
    With z the first zero, dy_i/dx_k is y_i/x_k for x_k != 0, the products but x_z for k = z,
    and 0 at a later zero (its products hold x_z)."""
    x = op.operands[0]
    zero, one = full(b, 0.0, x.type), full(b, 1.0, x.type)
    is_zero = b.op("eq", x, zero)
    none_before = b.op("cumprod", b.op("select", is_zero, zero, one), axis=op.attrs["axis"], exclusive=True,
                       reverse=op.attrs["reverse"])
    first = b.op("bitwise_and", is_zero, b.op("eq", none_before, one))
    return is_zero, first, b.op("select", is_zero, one, x), _scan(b, "cumprod", b.op("select", first, one, x), op)


def cumprod_adjoint(b, op, cts):
    # d cumprod(x)_k = Σ_{i after k} ct_i dy_i/dx_k: (reverse-scanned ct*y)/x, and at the first zero
    # the reverse-scanned ct times the products without it (cumprod_zeros)
    _, first, nonzero, without_first = cumprod_zeros(b, op)
    ct = cts[0]
    at_first = _scan(b, "cumsum", b.op("mul", ct, without_first), op, flip=True)
    elsewhere = b.op("div", _scan(b, "cumsum", b.op("mul", ct, op.result), op, flip=True), nonzero)
    return (b.op("select", first, at_first, elsewhere),)


adjoint_rules["cumprod"] = cumprod_adjoint


def matmul_adjoint(b, op, cts):
    # d(A @ B) = ct @ Bᵀ, Aᵀ @ ct (transposes of the last two axes)
    a, m = op.operands
    perm = list(range(a.type.rank - 2)) + [a.type.rank - 1, a.type.rank - 2]
    return (b.op("matmul", cts[0], b.op("transpose", m, perm=perm)),
            b.op("matmul", b.op("transpose", a, perm=perm), cts[0]))


adjoint_rules["matmul"] = matmul_adjoint


# ---------------------------------------------------------------- custom gradients and external functions

def custom_gradient_adjoint(b, op, cts):
    # d custom(x) = backward(x, saved, ct): the user's VJP, never the forward's ops. The saved values
    # come from an ordinary call of the forward, so a second derivative differentiates the backward
    # and the forward feeding it (TensorFlow records a custom gradient's forward on outer tapes);
    # after expansion, cse merges that call with the node's own forward.
    k = op.attrs["results"]
    if any(ct is not None for ct in cts[k:]):
        raise CompileError(f"the values @{op.attrs['forward']} saves for its backward carry no cotangent; "
                           "use only the first results of a custom_gradient", op.loc)
    forward = b.emit("call", *op.operands, callee=FuncRef(op.attrs["forward"])) if len(cts) > k else ()
    seeds = [full(b, 0.0, r.type) if ct is None else ct for ct, r in zip(cts, op.results[:k])]
    return b.emit("call", *op.operands, *forward[k:], *seeds, callee=FuncRef(op.attrs["backward"]))


adjoint_rules["custom_gradient"] = custom_gradient_adjoint


def extern_call_adjoint(b, op, cts):
    # d f(x1..xn) = g(x1..xn, ct) elementwise, g the function attached with @gradient(f)
    return lift_elementwise(b, attached_gradient(b, op), (*op.operands, cts[0]))


adjoint_rules["extern_call"] = extern_call_adjoint


def attached_gradient(b: Builder, op: Op) -> Func:
    """The call-free gradient attached to an extern_call with @gradient; a located error without one."""
    symbol = op.attrs["symbol"]
    if not op.attrs["gradient"]:
        raise CompileError(f"no gradient for external function '{symbol}': attach one with @gradient({symbol})",
                           op.loc)
    (name,) = op.attrs["gradient"]
    return inline_func(b.funcs[name], Module(dict(b.funcs)), b.funcs)


def lift_elementwise(b: Builder, func: Func, args: tuple[Value, ...]) -> tuple[Value, ...]:
    """The call-free scalar function `func` applied elementwise to `args` (of one type): its ops
    replayed at the arguments' shape, scalar constants broadcast to it."""
    values: dict[Value, Value] = dict(zip(func.params, args))
    shape = args[0].type.shape
    for op in func.ops:
        operands = [values[v] for v in op.operands]
        values.update(zip(op.results, _lifted(b, func, op, operands, shape)))
    return tuple(values[v] for v in func.returns)


def _lifted(b: Builder, func: Func, op: Op, operands: list[Value], shape) -> tuple[Value, ...]:
    if op.name in ("constant", "dim"):
        scalar = b.op(op.name, **op.attrs)
        return (b.op("broadcast", scalar, dims=[], shape=shape) if shape else scalar,)
    if "elementwise" in OPS[op.name].traits:
        return b.emit(op.name, *operands, **op.attrs)
    if op.name in ("broadcast", "reshape") and op.result.type == op.operands[0].type:
        return (operands[0],)
    raise CompileError(f"the gradient @{func.name} of an external function must be elementwise, "
                       f"but it uses '{op.name}'", op.loc)


# ---------------------------------------------------------------- control flow (adjoint_control_flow.py)

adjoint_rules["if"] = if_adjoint
adjoint_rules["for"] = for_adjoint
adjoint_rules["while"] = while_adjoint
adjoint_rules["scan"] = scan_adjoint
