"""SIMD building blocks of the runtime library's kernels (gemm.py, blocked.py): fused multiply-adds
on vectors, splats, masked loads and stores and their lane masks, and the store-or-add that writes
a depth block's sums to C.

    fma_intrinsic(module, <8 x double>)         llvm.fma.v8f64: one rounding, as the hardware's
    masked_intrinsic(module, vector, "load")    llvm.masked.load.v8f64.p0: lanes past a mask untouched
    store_or_add(b, first, value, dst, align)   *dst = value on the first block, else *dst += value
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.codegen.lowering.loops import I1, I32, I64

PACK_ALIGN = 64  # one cache line, the widest vector the target may use: a packed buffer's alignment


def fma_intrinsic(module: ir.Module, vector: ir.VectorType) -> ir.Function:
    """`llvm.fma.v<n><t>`: one rounding, as the hardware FMA (declared by hand: llvmlite's
    declare_intrinsic does not name vector overloads)."""
    name = f"llvm.fma.v{vector.count}{_suffix(vector)}"
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(vector, [vector] * 3), name)


def splat(builder: ir.IRBuilder, vector: ir.VectorType, scalar: ir.Value) -> ir.Value:
    one = builder.insert_element(ir.Constant(vector, None), scalar, const(0, I32))
    return builder.shuffle_vector(one, ir.Constant(vector, None),
                                  ir.Constant(ir.VectorType(I32, vector.count), [0] * vector.count))


def masked_intrinsic(module: ir.Module, vector: ir.VectorType, operation: str) -> ir.Function:
    """`llvm.masked.load` or `llvm.masked.store` of `vector`s (declared by hand, as fma_intrinsic)."""
    name = f"llvm.masked.{operation}.v{vector.count}{_suffix(vector)}.p0"
    if name in module.globals:
        return module.globals[name]
    mask = ir.VectorType(I1, vector.count)
    pointer = vector.as_pointer()
    signature = (ir.FunctionType(vector, [pointer, I32, mask, vector]) if operation == "load"
                 else ir.FunctionType(ir.VoidType(), [vector, pointer, I32, mask]))
    return ir.Function(module, signature, name)


def lanes_below(builder: ir.IRBuilder, lanes: int, count: ir.Value) -> ir.Value:
    """The mask of a vector's `lanes` lanes i < count (all of them when count >= lanes, none when <= 0)."""
    indices = ir.VectorType(I64, lanes)
    return builder.icmp_signed("<", ir.Constant(indices, list(range(lanes))), splat(builder, indices, count))


def store_or_add(builder: ir.IRBuilder, first: ir.Value, value: ir.Value, dst: ir.Value, align: int) -> None:
    """*dst = value on the first depth block (beta = 0: old C never read), else *dst += value."""
    with builder.if_else(first) as (overwrite, accumulate):
        with overwrite:
            builder.store(value, dst, align=align)
        with accumulate:
            builder.store(builder.fadd(builder.load(dst, align=align), value), dst, align=align)


def masked_store_or_add(builder: ir.IRBuilder, first: ir.Value, value: ir.Value, dst: ir.Value, mask: ir.Value,
                        align: int) -> None:
    """store_or_add of the lanes `mask` selects; the others are neither read nor written."""
    module, vector, alignment = builder.module, value.type, ir.Constant(I32, align)
    store = masked_intrinsic(module, vector, "store")
    with builder.if_else(first) as (overwrite, accumulate):
        with overwrite:
            builder.call(store, [value, dst, alignment, mask])
        with accumulate:
            old = builder.call(masked_intrinsic(module, vector, "load"), [dst, alignment, mask, ir.Constant(vector, None)])
            builder.call(store, [builder.fadd(old, value), dst, alignment, mask])


def internal_function(module: ir.Module, name: str, params: list) -> ir.Function:
    """A `void` function of `params` that only its module calls."""
    func = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name)
    func.linkage = "internal"
    return func


def is_zero(builder: ir.IRBuilder, value: ir.Value) -> ir.Value:
    return builder.icmp_signed("==", value, ir.Constant(value.type, 0))


def minimum(builder: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return builder.select(builder.icmp_signed("<", x, y), x, y)


def const(value: int, type_: ir.IntType = I64) -> ir.Constant:
    return ir.Constant(type_, value)


def _suffix(vector: ir.VectorType) -> str:
    return "f32" if isinstance(vector.element, ir.FloatType) else "f64"
