"""Region functions of one body merged: a body compiles once however many copies of it there are.

Differentiating a loop makes several regions of one body (its steps stored and its segments
recomputed each take the body's VJP), and inlining copies a region into every function that
calls it: the VJP of the VJP through a checkpointed loop holding an `if` and a `while` (the
nested tapes of tests/runtime/test_loops.py) reached lowering with 158 region functions, 43 of
them copies of another. Two region functions whose text is the same but for their own names
compute the same thing, so every control-flow op or call naming the second may name the first;
renamed references make their callers alike in turn, so merging repeats until no two are.

    %0 = if %c {then = @f_if0_vjp_all, else = @f_if1_vjp_all}        # before
    %1 = if %c {then = @f_if0_vjp_all1, else = @f_if1_vjp_all1}      # (the same bodies)
    %1 = if %c {then = @f_if0_vjp_all, else = @f_if1_vjp_all}        # after: two regions fewer

Only region functions merge (Module.regions: run by their parent, never called alone); a kernel
keeps its name. Locations are part of the text, so a bounds error still names the op it comes
from.
"""
from __future__ import annotations

from typing import Any, Mapping

from adc.ir.core import Attrs, Func, FuncRef, Module, Op
from adc.ir.printer import format_func


def merged_regions(module: Module) -> Module:
    """`module` with each region function of the same text as an earlier one (its own name aside)
    replaced by that one, every reference renamed, until no two are alike."""
    funcs = dict(module.funcs)
    texts: dict[Func, str] = {}     # each function's text, made once: a round rebuilds only those it renames in
    while True:
        regions = Module(funcs, module.name).regions()
        first: dict[str, str] = {}
        renamed: dict[str, str] = {}
        for name, func in funcs.items():
            if name in regions:
                if func not in texts:
                    texts[func] = format_func(func).replace(f"@{name}(", "@(", 1)
                kept = first.setdefault(texts[func], name)
                if kept != name:
                    renamed[name] = kept
        if not renamed:
            return Module(funcs, module.name)
        funcs = {name: _referring(func, renamed) for name, func in funcs.items() if name not in renamed}


def _referring(func: Func, renamed: Mapping[str, str]) -> Func:
    """`func` with the functions its ops name renamed (the same Func when it names none of them)."""
    if not any(r in renamed for r in func.references()):
        return func
    ops = tuple(Op(op.name, op.operands, Attrs({k: _renamed(v, renamed) for k, v in op.attrs.items()}),
                   op.results, op.loc) if any(r in renamed for r in _names(op)) else op for op in func.ops)
    return Func(func.name, func.params, ops, func.returns, func.loc)


def _names(op: Op) -> tuple[FuncRef, ...]:
    return tuple(r for value in op.attrs.values() for r in (value if isinstance(value, tuple) else (value,))
                 if isinstance(r, FuncRef))


def _renamed(value: Any, renamed: Mapping[str, str]) -> Any:
    if isinstance(value, tuple):
        return tuple(_renamed(v, renamed) for v in value)
    if isinstance(value, FuncRef) and value in renamed:
        return FuncRef(renamed[value])
    return value
