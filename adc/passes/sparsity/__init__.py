"""Sparsity detection: which elements of the `wrt` input each element of a function's results
may depend on (through derivatives), as a boolean CSR pattern per result.

An analysis, not a transformation: it walks the function with the interpreter's walk
(adc/ir/interp.py `walk`) under its own semantics, one rule per op in `sparsity_rules`
(array_rules.py, control_flow.py), for concrete sizes. A value's state is a `Dependence`
(dependence.py): its shape, its `Pattern` (patterns.py) and, when the integer inputs and the
constants fix them, its elements -- which gathers, scatters, loops and branches read, so an
integer input specializes the pattern. Float inputs are never read: a pattern holds for every
value of them. Integer and bool values carry no pattern (no derivative flows through them).

    func @f(%x: f64[N]) -> f64[N-1] {                      jacobian_patterns(m, "f", [x], 0)[0]
      %0 = slice %x {start = [1], stop = [N], step = [1]}    row r: {r, r + 1}
      %1 = slice %x {start = [0], stop = [N-1], step = [1]}
      %2 = sub %0, %1
      return %2
    }

Conservative where it cannot know: indices computed from floats (a gather may read its whole
line along the axis), conditions on floats (both branches; a while loop's fixed point), max and
min reductions (every element), `while` loops on floats and long loops the all-iterations walk
(iterations.py) cannot follow (a fixed point over an unknown index), values that cancel (`x - x`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from adc.ir.core import Func, Module, Op, Value
from adc.ir.interp import Context, Semantics, evaluate, walk
from adc.ir.ops import OPS
from adc.ir.ops.calls import bind_dims
from adc.ir.trampoline import trampoline
from adc.ir.types import TensorType
from adc.passes.sparsity import array_rules, control_flow
from adc.passes.sparsity.control_flow import UNROLLED_TRIPS
from adc.passes.sparsity.dependence import Dependence
from adc.passes.sparsity.patterns import Pattern, union

__all__ = ["Dependence", "Pattern", "UNROLLED_TRIPS", "jacobian_patterns", "sparsity_rules", "union"]

sparsity_rules = {**array_rules.sparsity_rules, **control_flow.sparsity_rules}


def jacobian_patterns(module: Module, name: str, args: Sequence, wrt: int,
                      integers_known: bool = True) -> tuple[Pattern, ...]:
    """Per result of function `name`, its pattern (result size × wrt size) at the sizes of `args`:
    the example arguments, of which only the shapes of float ones and the values of integer ones
    are read (not even those without `integers_known`: a pattern for every value of them)."""
    func = module[name]
    if len(args) != len(func.params):
        raise ValueError(f"@{name} takes {len(func.params)} arguments, got {len(args)}")
    states = [_start(p, np.asarray(a), i == wrt, integers_known) for i, (p, a) in enumerate(zip(func.params, args))]
    columns = states[wrt].size
    results = trampoline(walk(module, func, states, SPARSITY))
    return tuple(r.pattern or Pattern.empty(r.size, columns) for r in results)


def _start(param: Value, arg: np.ndarray, is_wrt: bool, integers_known: bool) -> Dependence:
    if is_wrt:
        return Dependence(arg.shape, Pattern.identity(arg.size))
    if param.type.dtype.is_float or not integers_known:
        return Dependence(arg.shape)
    return Dependence(arg.shape, None, arg.astype(param.type.dtype.numpy))


def _apply(op: Op, states: Sequence[Dependence], ctx: Context):
    """An op's result states: computed by the interpreter when every operand is known (an index
    computed from integer inputs), else by the op's rule; independent when no operand depends on
    wrt (and the op runs no function, whose integer results may still become known)."""
    opdef = OPS[op.name]
    runs_functions = bool(opdef.regions) or opdef.has("calls")
    if not runs_functions and all(s.value is not None for s in states):
        outs = evaluate(op, [s.value for s in states], ctx)
        return tuple(Dependence(np.shape(o), None, np.asarray(o)) for o in outs)
    if not runs_functions and all(s.pattern is None for s in states):
        return tuple(Dependence(ctx.shape(r.type.shape)) for r in op.results)
    return sparsity_rules[op.name](op, states, ctx)


def _bind(func: Func, states: Sequence[Dependence]) -> tuple[list, dict[str, int]]:
    """A function's dimension symbols, bound to the shapes of its arguments' states."""
    types = [TensorType(p.type.dtype, s.shape) for p, s in zip(func.params, states)]
    return list(states), dict(bind_dims(func.param_types, types))


def _keep(name: str, value: Value, state: Dependence, ctx: Context) -> Dependence:
    """A result's state, checked against its type; integer and bool values carry no pattern."""
    shape = ctx.shape(value.type.shape)
    if tuple(state.shape) != shape:
        raise RuntimeError(f"sparsity rule of '{name}' produced shape {state.shape}, its type {value.type} says {shape}")
    known = None if state.value is None else state.value.astype(value.type.dtype.numpy, copy=False)
    if not value.type.dtype.is_float or (state.pattern is not None and not state.pattern.nnz):
        return Dependence(shape, None, known)
    return Dependence(shape, state.pattern, known)


SPARSITY = Semantics(_apply, _bind, _keep)
