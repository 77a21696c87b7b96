"""Specialization: a kernel with some of its dimension symbols bound to sizes.

A kernel compiles once for every size of its symbols; bound to the sizes of the calls it will
serve (JAX's static shapes under `jit`, the concrete sizes a sparse pattern was built for), its
loops have constant trip counts, which LLVM unrolls when short and vectorizes without
remainders. The specialized kernel is a new function whose params have the bound sizes, its
body the kernel's inlined into it: inlining binds the callee's symbols to the caller's
dimensions, substitutes them in every type and dimension attribute, and copies the regions of
control-flow ops with the sizes in them (passes/inline.py).

    func @f(%x: f32[B,C]) -> f32[B] {...}
    specialize(module, "f", {"C": 5})       # func @f_C5(%x: f32[B,5]) -> f32[B] {...}
"""
from __future__ import annotations

from typing import Mapping

from adc.errors import CompileError
from adc.ir.core import Attrs, Func, FuncRef, Module, Op, Value
from adc.passes.inline import inline_func, substitute_type


def specialize(module: Module, name: str, sizes: Mapping[str, int]) -> tuple[Module, Func]:
    """`module` plus kernel `name` with the symbols of `sizes` bound (each a symbol its params
    bind, each size non-negative), named after them; and that function."""
    func = module[name]
    unknown = sorted(set(sizes) - set(func.dim_symbols))
    if unknown:
        raise CompileError(f"@{name} has no dimension symbol {', '.join(unknown)} among its parameters' "
                           f"({', '.join(func.dim_symbols) or 'none'})", func.loc)
    negative = sorted(s for s, n in sizes.items() if n < 0)
    if negative:
        raise CompileError(f"@{name}: a size must be non-negative, got "
                           f"{', '.join(f'{s} = {sizes[s]}' for s in negative)}", func.loc)
    params = tuple(Value(substitute_type(p.type, sizes), p.name) for p in func.params)
    results = tuple(Value(substitute_type(t, sizes)) for t in func.result_types)
    call = Op("call", params, Attrs({"callee": FuncRef(name)}), results, func.loc)
    wrapper = Func(_fresh(module, specialized_name(name, sizes)), params, (call,), results, func.loc)
    clones: dict[str, Func] = {}
    made = inline_func(wrapper, module, clones)
    return module.replace(*clones.values(), made), made


def specialized_name(name: str, sizes: Mapping[str, int]) -> str:
    """`f` with B = 600 and C = 5 bound: `f_B600_C5`."""
    return "_".join([name, *(f"{s}{n}" for s, n in sorted(sizes.items()))])


def _fresh(module: Module, name: str) -> str:
    while name in module.funcs:
        name += "_"
    return name
