"""The kernels of a program in an order where every callee comes before its callers.

Part of elaboration (`elaborate.py` builds kernels in this order, so a call finds its callee's
signature and contracts already made). A cycle of calls is a located CompileError: kernels
cannot recurse. The walks run on explicit stacks, as call chains are as long as the program
and expressions nest as deep as they are long:

    def g(x): return f(x)          callees_first  ->  ["f", "g", "h"]
    def f(x): return x
    def h(x): return g(x) + f(x)
"""
from __future__ import annotations

import dataclasses
import functools

from adc.errors import CompileError, Location
from adc.frontend import ast
from adc.ir.trampoline import trampoline


def callees_first(defs: dict[str, ast.FuncDef]) -> list[str]:
    """Kernel names in an order where every callee precedes its callers; cycles are errors. The
    gradient of an external function is only named by its calls, not called (it is declared
    up front), so gradients may use external functions whose gradients use theirs."""
    order: list[str] = []
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(name: str):
        state[name] = "visiting"
        path.append(name)
        for call in _calls(defs[name]):
            callee = call.func          # an external function's name is not in defs
            if callee not in defs:
                continue
            if state.get(callee) == "visiting":
                cycle = " -> ".join(path[path.index(callee):] + [callee])
                raise CompileError(f"recursive call to '{callee}' ({cycle}); kernels cannot recurse", call.loc)
            if callee not in state:
                yield visit(callee)
        path.pop()
        state[name] = "done"
        order.append(name)

    for name in defs:
        if name not in state:
            trampoline(visit(name))     # a chain of calls is as long as the program
    return order


def _calls(node) -> list[ast.Call]:
    """Every call expression under `node`, in source order; walked on a stack of its own, as
    expressions nest as deep as they are long."""
    found: list[ast.Call] = []
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, (list, tuple)):
            stack += reversed(node)
        elif dataclasses.is_dataclass(node) and not isinstance(node, Location):
            if isinstance(node, ast.Call):
                found.append(node)
            stack += reversed([getattr(node, name) for name in _field_names(type(node))])
    return found


@functools.cache
def _field_names(node_type: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(node_type))
