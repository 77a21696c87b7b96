"""Structured control flow: for, scan, while, if.

Each region is a function of the module named by an attribute (XLA's While and Conditional do
the same): every pass that works on functions works inside regions, and a region's IR prints,
parses and verifies like any function. A region function shares its parent's dimension symbols:
its parameters have exactly the types of the op's operands, and symbols its parameters do not
bind are the parent's (Func.free_symbols).
"""
from __future__ import annotations

from typing import Sequence

from adc.ir.ops.calls import callee
from adc.ir.ops.record import define, require
from adc.ir.types import BOOL, I64, SymDim, TensorType


I64_SCALAR = TensorType(I64)
BOOL_SCALAR = TensorType(BOOL)


def _signature_text(types) -> str:
    return f"({', '.join(map(str, types))})"


def _check_region(funcs, attrs, key: str, params: Sequence[TensorType], results: Sequence[TensorType] | None):
    """The region function `attrs[key]`, checked to take `params` (and return `results`)."""
    region = callee(funcs, attrs, key)
    require(region.param_types == tuple(params),
            f"@{region.name} ({key}) must take {_signature_text(params)}, got {region.signature()}")
    if results is not None:
        require(region.result_types == tuple(results),
                f"@{region.name} ({key}) must return {_signature_text(results)}, got {region.signature()}")
    return region


def _carried_count(attrs, operands: Sequence[TensorType]) -> int:
    k = attrs["carried"]
    require(isinstance(k, int) and not isinstance(k, bool) and 0 <= k <= len(operands),
            f"`carried` must be in 0..{len(operands)}, got {k!r}")
    return k


def _loop_operands(types, attrs) -> tuple[tuple[TensorType, ...], int]:
    # operands: the trip count, the k carried values' initial values, then the captured values
    require(len(types) >= 1 and types[0] == I64_SCALAR, f"the trip count must be an i64 scalar, got "
                                                         f"{types[0] if types else 'nothing'}")
    operands = tuple(types[1:])
    return operands, _carried_count(attrs, operands)


def _for_rule(types, attrs, funcs):
    # body(iteration, carried..., captured...) -> carried...; `checkpoint` is how reverse mode
    # stores the carried values: 0 (the default policy), or every k-th state for k >= 1
    operands, k = _loop_operands(types, attrs)
    require(isinstance(attrs["checkpoint"], int) and attrs["checkpoint"] >= 0,
            f"`checkpoint` must be 0 (the default policy) or a segment length k >= 1, got {attrs['checkpoint']!r}")
    _check_region(funcs, attrs, "body", (I64_SCALAR,) + operands, operands[:k])
    return operands[:k]


define("for", "run `body` for iterations 0 .. count-1 (none when count <= 0), threading the `carried` "
       "values from one iteration to the next; the other operands are read by every iteration",
       "func @step(%i: i64, %acc: f32[N], %x: f32[N]) -> f32[N] {\n  %0 = add %acc, %x : f32[N]\n"
       "  return %0\n}\n\n"
       "func @example(%n: i64, %x: f32[N]) -> f32[N] {\n"
       "  %0 = for %n, %x, %x {body = @step, carried = 1, checkpoint = 0} : f32[N]\n  return %0\n}\n",
       _for_rule, None, ("body", "carried", "checkpoint"), traits=("control_flow", "materializes", "counted"),
       regions=("body",), body_leads=1)


def _scan_rule(types, attrs, funcs):
    # a for loop whose body also returns values stacked along a new axis of `length`, a dimension
    # symbol the op binds to the trip count (clamped at 0); the axis is at `axis` of each stacked value.
    # body(iteration, carried..., captured...) -> (carried..., per-iteration values...)
    operands, k = _loop_operands(types, attrs)
    length, axis = attrs["length"], attrs["axis"]
    require(isinstance(length, str) and length.isidentifier(), f"`length` must name a dimension, got {length!r}")
    body = _check_region(funcs, attrs, "body", (I64_SCALAR,) + operands, None)
    require(body.result_types[:k] == operands[:k],
            f"@{body.name} (body) must return the carried {_signature_text(operands[:k])} first, got {body.signature()}")
    rows = body.result_types[k:]
    require(isinstance(axis, int) and all(0 <= axis <= r.rank for r in rows),
            f"`axis` {axis!r} is out of range for the stacked values {_signature_text(rows)}")
    size = SymDim.symbol(length)
    return operands[:k] + tuple(r.with_shape(r.shape[:axis] + (size,) + r.shape[axis:]) for r in rows)


define("scan", "a for loop that also stacks the values its body returns after the carried ones, along a "
       "new axis of `length`, a dimension symbol it binds to the trip count (what reverse mode stores)",
       "func @step(%i: i64, %acc: f32[N], %x: f32[N]) -> (f32[N], f32[N]) {\n  %0 = add %acc, %x : f32[N]\n"
       "  return %0, %acc\n}\n\n"
       "func @example(%n: i64, %x: f32[N]) -> f32[N] {\n"
       "  %0, %1 = scan %n, %x, %x {axis = 0, body = @step, carried = 1, length = \"L\"} : f32[N], f32[L,N]\n"
       "  return %0\n}\n",
       _scan_rule, None, ("axis", "body", "carried", "length"),
       traits=("control_flow", "materializes", "counted"), regions=("body",), body_leads=1)


def _while_rule(types, attrs, funcs):
    # operands: the k carried values' initial values, then the captured values;
    # cond(carried..., captured...) -> bool, body(carried..., captured...) -> carried...
    k = _carried_count(attrs, types)
    _check_region(funcs, attrs, "cond", types, (BOOL_SCALAR,))
    _check_region(funcs, attrs, "body", types, types[:k])
    return tuple(types[:k])


define("while", "run `body` on the `carried` values while `cond` holds; the other operands are read "
       "by every iteration",
       "func @below(%x: f32, %limit: f32) -> bool {\n  %0 = lt %x, %limit : bool\n  return %0\n}\n\n"
       "func @increment(%x: f32, %limit: f32) -> f32 {\n  %0 = constant {dtype = f32, value = 1.0} : f32\n"
       "  %1 = add %x, %0 : f32\n  return %1\n}\n\n"
       "func @example(%x: f32, %limit: f32) -> f32 {\n"
       "  %0 = while %x, %limit {body = @increment, carried = 1, cond = @below} : f32\n  return %0\n}\n",
       _while_rule, None, ("body", "carried", "cond"), traits=("control_flow", "materializes"),
       regions=("cond", "body"), body_leads=0)


def _if_rule(types, attrs, funcs):
    # operands: the condition, then the values both branches read; each branch takes those values
    require(len(types) >= 1 and types[0] == BOOL_SCALAR,
            f"the condition must be a bool scalar, got {types[0] if types else 'nothing'}")
    then = _check_region(funcs, attrs, "then_branch", types[1:], None)
    _check_region(funcs, attrs, "else_branch", types[1:], then.result_types)
    return then.result_types


define("if", "the results of `then_branch` when the condition holds, else of `else_branch`; only the "
       "branch taken runs",
       "func @twice(%x: f32[N]) -> f32[N] {\n  %0 = add %x, %x : f32[N]\n  return %0\n}\n\n"
       "func @same(%x: f32[N]) -> f32[N] {\n  return %x\n}\n\n"
       "func @example(%c: bool, %x: f32[N]) -> f32[N] {\n"
       "  %0 = if %c, %x {else_branch = @same, then_branch = @twice} : f32[N]\n  return %0\n}\n",
       _if_rule, None, ("else_branch", "then_branch"), traits=("control_flow", "materializes"),
       regions=("then_branch", "else_branch"))
