"""Simplification: constant folding and algebraic identities exact under IEEE arithmetic.

Runs after inlining, before cse and dce (it leaves the ops it bypasses for dce).
Ops are visited in order with their operands already simplified, so a rule sees
the simplified producers of its operands:

- an op whose operands are all scalar `constant`s and whose result is a scalar
  is folded, computing with the interpreter's own rule in the op's dtype;
  broadcasts of constants stay broadcasts (a constant is a scalar), and an elementwise op of
  them, or a slice, reshape, transpose, concat or pad of one constant, is a broadcast of the
  constant it computes;
- `simplify_rules[op]` rewrites identities: x*1, 1*x, x/1, x-(+0), x+(-0),
  x+x = x*2, -(-x), identity broadcast/reshape/transpose/convert, and chains of
  broadcasts, reshapes or transposes collapse into one op; a broadcast that only
  adds size-1 axes, or a transpose that only moves them, is a reshape.

Only rewrites exact for every input are made: x+0 is not x when x is -0.0
(-0.0 + 0.0 = +0.0), and x*0 is not 0 when x is inf or nan, so neither is done.

    %0 = constant {dtype = f32, value = 1.0} : f32
    %1 = broadcast %0 {dims = [], shape = [N]} : f32[N]      ==>     return %x
    %2 = mul %x, %1 : f32[N]
    return %2
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np

from adc.ir.builder import Builder, full
from adc.ir.core import Func, Module, Op, Value
from adc.ir.interp import Context, eval_rules
from adc.ir.ops import with_trait
from adc.ir.reshapes import merged_runs


class Rewriter:
    """What a rule sees: the builder of the new body and the producers of its values."""

    def __init__(self, builder: Builder):
        self.builder = builder
        self.producers: dict[Value, Op] = {}

    def producer(self, value: Value) -> Op | None:
        return self.producers.get(value)

    def producer_named(self, value: Value, name: str) -> Op | None:
        op = self.producers.get(value)
        return op if op is not None and op.name == name else None

    def constant(self, value: Value) -> int | float | bool | None:
        """The scalar a value holds everywhere when it is a (broadcast) `constant`, else None."""
        op = self.producers.get(value)
        while op is not None and op.name == "broadcast":
            op = self.producers.get(op.operands[0])
        return op.attrs["value"] if op is not None and op.name == "constant" else None

    def emit(self, op: Op) -> None:
        self.builder.ops.append(op)
        self.producers.update((r, op) for r in op.results)


# simplify_rules[op_name](op, operands, rw) -> Value | None
#   op:       the original op (attrs, result types, location)
#   operands: its operands after simplification
#   rw:       the Rewriter; new ops are built with rw.builder (stamped with op.loc)
# A rule returns the value replacing the op's single result, or None to keep the op.
SimplifyRule = Callable[[Op, Sequence[Value], Rewriter], "Value | None"]
simplify_rules: dict[str, SimplifyRule] = {}


def _is_one(c) -> bool:
    return c is not None and not isinstance(c, bool) and c == 1


def _is_zero(c, negative: bool) -> bool:
    """c is a zero of the given sign (integers have only +0)."""
    if c is None or isinstance(c, bool) or c != 0:
        return False
    return (math.copysign(1.0, c) < 0) == negative


def mul_simplify(op, operands, rw):
    # x*1 = 1*x = x
    x, y = operands
    return x if _is_one(rw.constant(y)) else y if _is_one(rw.constant(x)) else None


simplify_rules["mul"] = mul_simplify


def div_simplify(op, operands, rw):
    # x/1 = x
    x, y = operands
    return x if _is_one(rw.constant(y)) else None


simplify_rules["div"] = div_simplify


def sub_simplify(op, operands, rw):
    # x-(+0) = x, also for x = -0.0
    x, y = operands
    return x if _is_zero(rw.constant(y), negative=False) else None


simplify_rules["sub"] = sub_simplify


def add_simplify(op, operands, rw):
    # x+(-0) = x for every x; x+(+0) is +0.0 for x = -0.0, so it stays (integers: x+0 = x)
    x, y = operands
    if x is y:
        return _twice(x, rw)
    integral = op.result.type.dtype.is_int
    if _is_zero(rw.constant(y), negative=not integral):
        return x
    return y if _is_zero(rw.constant(x), negative=not integral) else None


simplify_rules["add"] = add_simplify


def _twice(x: Value, rw: Rewriter) -> Value:
    # x+x = x*2 exactly (both round 2x once); the adjoint pass makes such sums when it accumulates
    two = rw.builder.op("constant", dtype=x.type.dtype, value=2 if x.type.dtype.is_int else 2.0)
    if x.type.rank:
        two = rw.builder.op("broadcast", two, dims=[], shape=x.type.shape)
    return rw.builder.op("mul", x, two)


def neg_simplify(op, operands, rw):
    # -(-x) = x
    inner = rw.producer_named(operands[0], "neg")
    return inner.operands[0] if inner is not None else None


simplify_rules["neg"] = neg_simplify


def convert_simplify(op, operands, rw):
    # convert to the operand's own dtype is the identity
    (x,) = operands
    return x if x.type == op.result.type else None


simplify_rules["convert"] = convert_simplify


def broadcast_simplify(op, operands, rw):
    # broadcast(broadcast(x, d1), d2) = broadcast(x, d2∘d1); identity broadcast = x
    (x,) = operands
    if x.type == op.result.type:
        return x
    if _only_unit_axes(x.type.shape, op.result.type.shape, op.attrs["dims"]):
        return _reshaped(x, op.result.type, rw)
    inner = rw.producer_named(x, "broadcast")
    if inner is None:
        return None
    dims = [op.attrs["dims"][d] for d in inner.attrs["dims"]]
    return rw.builder.op("broadcast", inner.operands[0], dims=dims, shape=op.attrs["shape"])


simplify_rules["broadcast"] = broadcast_simplify


def _only_unit_axes(source, shape, dims) -> bool:
    """True when broadcasting `source` into `shape` along `dims` only adds size-1 axes (a reshape)."""
    return all(source[i] == shape[d] for i, d in enumerate(dims)) and \
        all(shape[d] == 1 for d in range(len(shape)) if d not in dims)


def reshape_simplify(op, operands, rw):
    # reshape(reshape(x)) = reshape(x) (row-major order is kept); reshape to the same shape = x;
    # merging axes, permuting the merged ones and splitting them again is one transpose of x
    (x,) = operands
    regrouped = _regrouped_transpose(x, op.result.type.shape, rw)
    if regrouped is not None:
        return regrouped
    if x.type == op.result.type or rw.producer_named(x, "reshape"):
        return _reshaped(x, op.result.type, rw)
    return None


def _reshaped(x: Value, type, rw: Rewriter) -> Value:
    """x reshaped to `type`, through the reshape that made x (row-major order is kept), or x itself."""
    inner = rw.producer_named(x, "reshape")
    source = inner.operands[0] if inner is not None else x
    return source if source.type == type else rw.builder.op("reshape", source, shape=type.shape)


simplify_rules["reshape"] = reshape_simplify


def _regrouped_transpose(x: Value, shape, rw: Rewriter) -> Value | None:
    """reshape(transpose(reshape(v), p), shape) as transpose(v, q) when the inner reshape merges runs
    of v's axes and the outer one splits the permuted axes into the same runs (indexing through one
    transpose costs no division, through the three a division per merged axis)."""
    transpose = rw.producer_named(x, "transpose")
    merge = transpose and rw.producer_named(transpose.operands[0], "reshape")
    if merge is None:
        return None
    v = merge.operands[0]
    runs = merged_runs(v.type.shape, merge.result.type.shape)
    splits = merged_runs(tuple(shape), x.type.shape)
    perm = transpose.attrs["perm"]
    if runs is None or splits is None or any(
            [v.type.shape[a] for a in runs[p]] != [shape[a] for a in split] for p, split in zip(perm, splits)):
        return None
    return rw.builder.op("transpose", v, perm=[a for p in perm for a in runs[p]])


def transpose_simplify(op, operands, rw):
    # transpose(transpose(x, p1), p2) = transpose(x, p1∘p2); the identity permutation is x
    (x,) = operands
    perm = list(op.attrs["perm"])
    inner = rw.producer_named(x, "transpose")
    if inner is not None:
        x, perm = inner.operands[0], [inner.attrs["perm"][p] for p in perm]
    if perm == sorted(perm):
        return x
    moved = [p for p in perm if x.type.shape[p] != 1]
    if moved == sorted(moved):      # only size-1 axes move: the elements keep their order
        return _reshaped(x, op.result.type, rw)
    return rw.builder.op("transpose", x, perm=perm) if inner is not None else None


simplify_rules["transpose"] = transpose_simplify


def dim_simplify(op, operands, rw):
    # a dimension known statically is a constant
    value = op.attrs["value"]
    if not isinstance(value, int):
        return None
    dtype = op.attrs["dtype"]
    return rw.builder.op("constant", dtype=dtype, value=np.asarray(value, dtype.numpy).item())


simplify_rules["dim"] = dim_simplify


# calls and control flow run functions of the module
_NOT_FOLDED = with_trait("calls") | with_trait("control_flow") | {"stop_gradient"}
_ELEMENTWISE = with_trait("elementwise")
# ops whose result elements are their operands' elements (not an indexing op's: an empty axis gives 0)
_SELECTING = (with_trait("index_map") | with_trait("selects")) - with_trait("indexing")


def _fold(op: Op, operands: Sequence[Value], rw: Rewriter) -> Value | None:
    """An op of constants becomes a constant, computed as the interpreter does: a scalar op of
    scalars, or an elementwise op of broadcast constants (then a broadcast of it); and what only
    selects among the elements of operands all holding one constant holds it."""
    if op.name in _NOT_FOLDED or not operands or len(op.results) != 1:
        return None
    values = [rw.constant(v) for v in operands]
    if any(v is None for v in values):
        return None
    result = op.result.type
    if op.name in _SELECTING and result.rank:
        same = all(repr(v) == repr(values[0]) and o.type.dtype == result.dtype for v, o in zip(values, operands))
        return full(rw.builder, values[0], result) if same and op.name != "broadcast" else None
    if result.rank and not (op.name in _ELEMENTWISE and all(o.type.shape == result.shape for o in operands)):
        return None
    if not result.rank and any(o.type.rank for o in operands):
        return None
    args = [np.asarray(v, o.type.dtype.numpy) for v, o in zip(values, operands)]
    with np.errstate(all="ignore"):
        (out,) = eval_rules[op.name](args, op.attrs, Context({}, Module()))
    folded = np.asarray(out).astype(result.dtype.numpy).item()
    return full(rw.builder, folded, result) if result.rank else \
        rw.builder.op("constant", dtype=result.dtype, value=folded)


def simplify(module: Module) -> Module:
    return Module({f.name: simplify_func(f, module.funcs) for f in module}, module.name)


def simplify_func(func: Func, funcs: Mapping[str, Func]) -> Func:
    rw = Rewriter(Builder(funcs))
    replaced: dict[Value, Value] = {}
    for op in func.ops:
        operands = tuple(replaced.get(v, v) for v in op.operands)
        start = len(rw.builder.ops)
        with rw.builder.at(op.loc):
            new = _fold(op, operands, rw) or _apply_rule(op, operands, rw)
        for built in rw.builder.ops[start:]:
            rw.producers.update((r, built) for r in built.results)
        if new is not None:
            replaced[op.result] = new
        else:
            rw.emit(op if operands == op.operands else Op(op.name, operands, op.attrs, op.results, op.loc))
    returns = tuple(replaced.get(v, v) for v in func.returns)
    return Func(func.name, func.params, tuple(rw.builder.ops), returns, func.loc)


def _apply_rule(op: Op, operands: Sequence[Value], rw: Rewriter) -> Value | None:
    rule = simplify_rules.get(op.name)
    return rule(op, operands, rw) if rule is not None else None
