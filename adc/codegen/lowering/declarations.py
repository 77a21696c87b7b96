"""Functions a lowered module calls but does not define: LLVM intrinsics and C library functions.

Each is declared in the LLVM module on first use and found there afterwards, so any rule may
call one (llvm.smax.i64, aligned_alloc, an extern's symbol) whoever declared it first.
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.lowering.element_types import INT_SUFFIX
from adc.ir.types import DType


def intrinsic(b: ir.IRBuilder, name: str, args: list[ir.Value], dtype: DType, flags=()) -> ir.Value:
    """Call `llvm.<name>.<type>` (`<vN x type>` for vector arguments), declaring it on first use."""
    lanes = args[0].type.count if isinstance(args[0].type, ir.VectorType) else 0
    full = f"llvm.{name}.{f'v{lanes}' if lanes else ''}{INT_SUFFIX[dtype]}"
    fn = b.module.globals.get(full)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(args[0].type, [a.type for a in args]), full)
    return b.call(fn, args, fastmath=flags)


def libc(llmod: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    existing = llmod.globals.get(name)
    return existing if existing is not None else ir.Function(llmod, ir.FunctionType(ret, args), name)
