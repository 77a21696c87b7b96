"""Expansion of custom gradients: each `custom_gradient` node becomes a call of its forward.

Runs first in the default pipeline, before inlining: once a program is no longer
differentiated, a custom-gradient node is just its forward computation, and the
inliner then copies it into its caller like any call. Differentiation happens
before this pass (adc/passes/adjoint.py keeps the node, whose adjoint rule calls
the user's backward). The node's results are exactly the forward's, so uses are
unchanged; the backward function is kept (it is an ordinary kernel).

    %0, %1 = custom_gradient %x {backward = @f_backward,       %0, %1 = call %x {callee = @f_forward}
             forward = @f_forward, results = 1} : f32, f32  ==>           : f32, f32
"""
from __future__ import annotations

from adc.ir.core import Attrs, Func, FuncRef, Module, Op


def expand_custom_gradients(module: Module) -> Module:
    return Module({f.name: expand_func(f) for f in module}, module.name)


def expand_func(func: Func) -> Func:
    if not any(op.name == "custom_gradient" for op in func.ops):
        return func
    return Func(func.name, func.params, tuple(_expanded(op) for op in func.ops), func.returns, func.loc)


def _expanded(op: Op) -> Op:
    if op.name != "custom_gradient":
        return op
    return Op("call", op.operands, Attrs({"callee": FuncRef(op.attrs["forward"])}), op.results, op.loc)
