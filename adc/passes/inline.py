"""Inlining: replace every `call` by the callee's body, recursively.

Runs first in the default pipeline so that simplify, cse and codegen see one
call-free body per kernel. The callee's dimension symbols are bound to the
caller's dimensions (`bind_dims`) and substituted in result types and in every
dimension-valued attribute (`shape`, `start`, `stop`, the `value` of `dim`).
Inlined ops keep their own locations; all functions are kept.

    func @sq(%x: f32[N]) -> f32[N] {               func @f(%y: f32[M]) -> f32[M] {
      %0 = mul %x, %x : f32[N]                       %0 = mul %y, %y : f32[M]
      return %0                          ==>         return %0
    }                                              }
    func @f(%y: f32[M]) -> f32[M] {
      %0 = call %y {callee = @sq} : f32[M]
      return %0
    }
"""
from __future__ import annotations

from typing import Any, Mapping

from adc.errors import CompileError
from adc.ir.core import REGION_ATTRS, Attrs, Func, FuncRef, Module, Op, Value
from adc.ir.ops import bind_dims, substitute
from adc.ir.trampoline import trampoline
from adc.ir.types import Dim, SymDim, TensorType


def inline(module: Module) -> Module:
    clones: dict[str, Func] = {}
    inlined = {f.name: inline_func(f, module, clones) for f in module}
    return Module({**inlined, **clones}, module.name)


def callees(func: Func) -> tuple[str, ...]:
    """The functions `func` calls, in order of appearance: what inlining copies into it."""
    return tuple(op.attrs["callee"] for op in func.ops if op.name == "call")


def inline_func(func: Func, module: Module, clones: dict[str, Func] | None = None) -> Func:
    """`func` with every call replaced by the callee's body. A control-flow op copied out of a
    callee whose dimensions are renamed gets copies of its regions with the new names (a region
    shares its parent's symbols), added to `clones`: a caller keeping the result keeps them too.
    A `scan` copied into a function that binds its length symbol already binds a fresh one."""
    if not callees(func):
        return func
    values: dict[Value, Value] = {}
    ops: list[Op] = []
    copies = _Copies(module, {} if clones is None else clones, func)
    trampoline(_inline_body(func, copies, values, {}, {func.name: None}, ops))
    returns = tuple(values.get(v, v) for v in func.returns)
    return Func(func.name, func.params, tuple(ops), returns, func.loc)


class _Copies:
    """What copying ops into one function needs: the module, the region copies made so far, and the
    dimension symbols the function binds (its params', its scans')."""

    def __init__(self, module: Module, clones: dict[str, Func], func: Func):
        self.module, self.clones = module, clones
        self.taken = set(func.dim_symbols) | {op.attrs["length"] for op in func.ops if op.name == "scan"}

    def func(self, name: str) -> Func:
        return self.clones[name] if name in self.clones else self.module[name]

    def fresh_symbol(self, base: str) -> str:
        candidate, n = base, 1
        while candidate in self.taken:
            candidate, n = f"{base}{n}", n + 1
        self.taken.add(candidate)
        return candidate

    def region(self, name: str, dims: Mapping[str, Dim]) -> str:
        """Region `name` with the symbols of `dims` renamed: itself when it uses none of them."""
        region = self.func(name)
        used = {s for s in dims if s in _symbols_of(region)}
        if not used:
            return name
        base, n = name, 1
        while f"{base}_{n}" in self.module.funcs or f"{base}_{n}" in self.clones:
            n += 1
        renamed = {s: dims[s] for s in used}
        targets = {t for d in renamed.values() for t in getattr(d, "symbols", ())}
        taken = targets | _symbols_of(region) | set(region.bound_symbols)
        for length in region.bound_symbols:     # its scans' lengths stay apart from the new names
            if length in targets:
                fresh, k = length, 1
                while fresh in taken:
                    fresh, k = f"{length}{k}", k + 1
                taken.add(fresh)
                renamed[length] = SymDim.symbol(fresh)
        values: dict[Value, Value] = {}
        params = tuple(Value(substitute_type(p.type, renamed), p.name) for p in region.params)
        values.update(zip(region.params, params))
        ops = tuple(self.copied(op, tuple(values.get(v, v) for v in op.operands), values, renamed)
                    for op in region.ops)
        copy = Func(f"{base}_{n}", params, ops, tuple(values.get(v, v) for v in region.returns), region.loc)
        self.clones[copy.name] = copy
        return copy.name

    def copied(self, op: Op, operands: tuple[Value, ...], values: dict[Value, Value], dims: dict[str, Dim]) -> Op:
        results = tuple(Value(substitute_type(r.type, dims) if dims else r.type) for r in op.results)
        values.update(zip(op.results, results))
        attrs = {k: _substitute_attr(v, dims) for k, v in op.attrs.items()} if dims else dict(op.attrs)
        for key in REGION_ATTRS.get(op.name, ()):
            attrs[key] = FuncRef(self.region(op.attrs[key], dims))
        if op.name == "scan" and op.attrs["length"] in dims:
            attrs["length"] = _renamed_symbol(op.attrs["length"], dims)
        return Op(op.name, operands, Attrs(attrs), results, op.loc)


def _symbols_of(func: Func) -> frozenset[str]:
    return frozenset(func.dim_symbols) | frozenset(func.free_symbols)


def _inline_body(func: Func, copies: _Copies, values: dict[Value, Value], dims: dict[str, Dim],
                 path: dict[str, None], ops: list[Op]):
    """Append to `ops` those of `func` with operands renamed by `values` and dimensions by `dims`,
    each call replaced by its callee's (a generator for the trampoline: a chain of calls is as
    long as the program). `path` holds the functions being inlined, outermost first.

    Ops of the function being inlined into (a one-entry `path`) keep their results; ops copied
    out of a callee get fresh ones, as a callee may be inlined several times.
    """
    for op in func.ops:
        operands = tuple(values.get(v, v) for v in op.operands)
        if op.name == "call":
            callee = copies.func(op.attrs["callee"])
            if callee.name in path:
                raise CompileError(f"cannot inline the recursive call of @{callee.name} "
                                   f"({' -> '.join([*path, callee.name])})", op.loc)
            inner: dict[Value, Value] = dict(zip(callee.params, operands))
            bound = _renamed(bind_dims(callee.param_types, [a.type for a in operands]))
            path[callee.name] = None
            yield _inline_body(callee, copies, inner, bound, path, ops)
            path.popitem()
            values.update(zip(op.results, (inner.get(v, v) for v in callee.returns)))
        elif len(path) > 1:
            if op.name == "scan" and op.attrs["length"] in copies.taken:
                dims[op.attrs["length"]] = SymDim.symbol(copies.fresh_symbol(op.attrs["length"]))
            copied = copies.copied(op, operands, values, dims)
            if op.name == "scan":
                copied = Op(copied.name, copied.operands, Attrs({**copied.attrs, "length": _renamed_symbol(
                    op.attrs["length"], dims)}), copied.results, copied.loc)
                copies.taken.add(copied.attrs["length"])
            ops.append(copied)
        else:
            ops.append(op if operands == op.operands else Op(op.name, operands, op.attrs, op.results, op.loc))


def _renamed_symbol(name: str, dims: Mapping[str, Dim]) -> str:
    new = dims.get(name)
    return name if new is None else next(iter(new.symbols))


def _renamed(dims: dict[str, Dim]) -> dict[str, Dim]:
    """The bindings that change a dimension: none when each symbol binds to itself (the callee's
    `N` is the caller's `N`), the usual case, whose types and attributes are then kept as they are."""
    return {} if all(d == SymDim.symbol(s) for s, d in dims.items()) else dims


def _substitute(d: Dim, dims: Mapping[str, Dim]) -> Dim:
    """`d` with the symbols `dims` binds replaced; the others (a region's parent's, a scan's) kept."""
    if not isinstance(d, SymDim):
        return d
    return substitute(d, {s: dims.get(s, SymDim.symbol(s)) for s in d.symbols})


def substitute_type(t: TensorType, dims: Mapping[str, Dim]) -> TensorType:
    """`t` with the symbols `dims` binds replaced in its shape; the others kept."""
    return t.with_shape(_substitute(d, dims) for d in t.shape)


def _substitute_attr(value: Any, dims: Mapping[str, Dim]) -> Any:
    """Every symbolic dimension in an attribute, at any nesting depth, is a dimension to rename."""
    if isinstance(value, SymDim):
        return _substitute(value, dims)
    if isinstance(value, tuple):
        return tuple(_substitute_attr(v, dims) for v in value)
    return value
