"""The exported face of a sparse derivative compiled at fixed sizes (`adc compile --sparse-jacobian`):
its pattern as constant arrays and the kernel that fills its nonzeros.

The compressed function (passes/jacobian.py `sparse_jacobian`) is an ordinary kernel taking the
derivative's params, then the coloring and the decompression index. This module adds what C
callers see: the int64 arrays `<symbol>_colptr`, `<symbol>_rowind`, the int64 `<symbol>_nnz`,
and `<symbol>(dims, inputs, outputs)` taking the params alone, which calls the compressed kernel
with the coloring and the index (internal constants) appended to its inputs:

    @adc_kernel_f_sparse_jacobian_x_colptr = constant [9 x i64] ...     (as bytes, 8-aligned)
    define i32 @adc_kernel_f_sparse_jacobian_x(ptr %dims, ptr %inputs, ptr %outputs) {
      %args = alloca ptr, i64 3                 ; inputs[0], @..._colors, @..._index
      %0 = call i32 @adc_kernel_f_sparse_jacobian_x_compressed(ptr %dims, ptr %args, ptr %outputs)
      ret i32 %0
    }
"""
from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

from adc.abi import pattern_symbols
from adc.codegen.lowering.loops import I8, I32, PTR, i64

I64_BYTES = 8


def lower_sparse_export(symbol: str, compressed: str, params: int, colors: np.ndarray, index: np.ndarray,
                        colptr: np.ndarray, rowind: np.ndarray) -> ir.Module:
    """The LLVM module of the sparse derivative kernel `symbol` of `params` params, calling the
    kernel `compressed` with `colors` and `index` after them, and of its pattern."""
    llmod = ir.Module(name=symbol)
    colptr_name, rowind_name, nnz_name = pattern_symbols(symbol)
    _array(llmod, colptr_name, colptr, exported=True)
    _array(llmod, rowind_name, rowind, exported=True)
    _array(llmod, nnz_name, np.array(len(rowind)), exported=True)
    extra = [_array(llmod, f"{symbol}.colors", colors), _array(llmod, f"{symbol}.index", index)]
    kernel_type = ir.FunctionType(I32, [PTR, PTR, PTR])
    inner = ir.Function(llmod, kernel_type, compressed)
    fn = ir.Function(llmod, kernel_type, symbol)
    dims, inputs, outputs = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    args = b.alloca(PTR, i64(params + len(extra)), name="args")
    for k in range(params):
        b.store(b.load(b.gep(inputs, [i64(k)], source_etype=PTR), typ=PTR), b.gep(args, [i64(k)], source_etype=PTR))
    for k, array in enumerate(extra):
        b.store(array, b.gep(args, [i64(params + k)], source_etype=PTR))
    b.ret(b.call(inner, [dims, args, outputs]))
    return llmod


def _array(llmod: ir.Module, name: str, values: np.ndarray, exported: bool = False) -> ir.GlobalVariable:
    """A constant array of int64 `values`, stored as its bytes (a large pattern is one constant,
    not a constant per element), 8-aligned; internal unless `exported`."""
    data = bytearray(np.ascontiguousarray(values, "<i8").tobytes()) or bytearray(I64_BYTES)
    array = ir.GlobalVariable(llmod, ir.ArrayType(I8, len(data)), name)
    array.global_constant, array.align = True, I64_BYTES
    if not exported:
        array.linkage = "internal"
    array.initializer = ir.Constant(ir.ArrayType(I8, len(data)), data)
    return array
