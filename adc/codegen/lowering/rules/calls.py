"""Element rule of extern_call: a call of a C function of the user's, declared in the module and
resolved by the JIT from the process or by the linker.

    %0 = extern_call %x {gradient = [], library = "", symbol = "erf"} : f64[N]   ──▶   call double @erf(double %x_i)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from adc.codegen.lowering.declarations import libc
from adc.codegen.lowering.element_types import REGISTER_TYPES
from adc.codegen.lowering.loops import Index
from adc.errors import CompileError
from adc.ir.core import Op

if TYPE_CHECKING:
    from adc.codegen.lowering.emitter import Emitter
    from adc.codegen.lowering.rules.table import LowerRule

lower_rules: dict[str, LowerRule] = {}      # this family's rows of table.lower_rules


def extern_call_lower(em: Emitter, op: Op, idx: Index) -> ir.Value:
    # symbol(x1[i], ..., xn[i]); the C function is declared here and resolved by the JIT from the
    # process or by the linker (libm is linked into every shared object)
    args = [em.value_at(v, idx) for v in op.operands]
    scalar = REGISTER_TYPES[op.result.type.dtype]
    fn = libc(em.llmod, op.attrs["symbol"], scalar, [scalar] * len(args))
    if fn.function_type != ir.FunctionType(scalar, [scalar] * len(args)):
        raise CompileError(f"external function '{op.attrs['symbol']}' is used with two signatures in one "
                           "module, or clashes with a function adc defines", op.loc)
    return em.b.call(fn, args)


lower_rules["extern_call"] = extern_call_lower
