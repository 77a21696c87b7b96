"""The VJP rules of calls: a call (inlined first), a custom gradient, an external function.

Part of the VJP rule table (adc/passes/adjoint_rules/__init__.py gathers the families' tables).
A custom gradient's cotangents come from the user's backward, an external function's from the
elementwise gradient attached to it with @gradient, replayed at the arguments' shape:

    %0 = custom_gradient %x {backward = @f_bwd, forward = @f_fwd, results = 1} : f64[N]
        ==>    %1 = call %x, %ct {callee = @f_bwd} : f64[N]                    (ct of %x)
"""
from __future__ import annotations

from adc.errors import CompileError
from adc.ir.builder import Builder, full
from adc.ir.core import Func, FuncRef, Module, Op, Value
from adc.ir.ops import OPS
from adc.passes.adjoint_rules.rule import AdjointRule
from adc.passes.inline import inline_func

adjoint_rules: dict[str, AdjointRule] = {}


def call_adjoint(b, op, cts):
    raise CompileError(f"the adjoint pass met a call of @{op.attrs['callee']}: inline calls first",
                       op.loc)


adjoint_rules["call"] = call_adjoint


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
