"""The shared native runtime library: what every module needs and no kernel specialises.

The register-blocked matrix-product kernels (gemm.py), the parallel-for with
its thread pool (pool.py), the interrupt counter loops poll (interrupts.py) and the steps of
float sums' cascades of block sums (lowering/summation.py) are compiled once per target into this library,
instead of being emitted and optimized again in every kernel module; kernel
modules only declare what they call:

    kernel module                         runtime library (one per target)
    declare void @adc_rt_gemm_f32(...)    define void @adc_rt_gemm_f32(...)  ; 8x32 tiles, AVX-512
    call void @adc_rt_gemm_f32(...)  ───▶ define void @adc_rt_parallel_for(...)

The JIT loads the library's object code once per process and publishes its
symbols, so every JIT module in the process calls the same code and shares one
thread pool (toolchain/jit.py's `publish`). A shared object links the library's object
code in and exports only the module's own symbols (toolchain/aot.py's version script), so
it stays self-contained: it loads with no compiler present, and two .so files
never bind to each other's copy.
"""
from __future__ import annotations

import llvmlite.ir as ir

from adc.abi import RUNTIME_GEMM_DTYPES
from adc.codegen.native import cholesky, gemm, householder, lu, pool, singular, symmetric, triangular
from adc.codegen.lowering import interrupts, summation
from adc.codegen.toolchain.target import Target
from adc.ir.types import DType


def runtime_module(target: Target, blockings: dict[DType, gemm.Blocking] | None = None) -> ir.Module:
    """The LLVM module of the runtime library for `target`, defining `abi.runtime_symbols()`; its
    gemm tiles are `blockings` (driver/gemm_tuning.py), by default the table's for the target's
    vector width."""
    if blockings is None:
        blockings = gemm.table(target.vector_bits)
    module = ir.Module(name="adc_runtime")
    for dtype in RUNTIME_GEMM_DTYPES:
        gemm.define_gemm(module, blockings[dtype])
    pool.define_runtime(module)
    for dtype in RUNTIME_GEMM_DTYPES:
        blk = blockings[dtype]
        triangular.define_trsm(module, blk)
        cholesky.define_potrf(module, blk)
        lu.define_getrf(module, blk)
        householder.define_qr(module, blk)
        symmetric.define_eigh(module, blk)
        singular.define_svd(module, blk)
    interrupts.define_runtime(module)
    summation.define_runtime(module)
    return module
