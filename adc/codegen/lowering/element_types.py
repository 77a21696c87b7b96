"""How an element of each dtype lives in LLVM: its type in a register and in memory, its size in
bytes, and the suffix naming its overload of an LLVM intrinsic.

A bool is an i1 in registers and a byte in memory (`Emitter.load` and `Emitter.store` convert).
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.lowering.loops import I1, I8, I32, I64
from adc.ir.types import DType

REGISTER_TYPES = {DType.f32: ir.FloatType(), DType.f64: ir.DoubleType(), DType.i32: I32,
                  DType.i64: I64, DType.bool: I1}
MEMORY_TYPES = {**REGISTER_TYPES, DType.bool: I8}
ELEMENT_BYTES = {DType.f32: 4, DType.f64: 8, DType.i32: 4, DType.i64: 8, DType.bool: 1}
INT_SUFFIX = {DType.f32: "f32", DType.f64: "f64", DType.i32: "i32", DType.i64: "i64"}
