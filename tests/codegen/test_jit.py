"""The in-process JIT: one compilation serves every size, and the fused loop is SIMD code."""
from __future__ import annotations

import re

import numpy as np

from adc.driver.loading import load_count
from tests.support.accuracy import assert_close
from tests.support.ir_kernels import kernel
from tests.support.native import call, compile_module
from tests.support.random_arrays import randn


def sigmoid_shift():
    return kernel("x: f32[N], delta: f32", lambda b, x, d: b.op("sigmoid", b.op(
        "add", x, b.op("broadcast", d, dims=[], shape=x.type.shape))), name="sigmoid_shift")


def test_one_compilation_serves_every_batch_size():
    module = sigmoid_shift()
    before = load_count()
    lib = compile_module(module)
    func = module["sigmoid_shift"]
    for n in (0, 1, 7, 64, 1001):
        x = randn(n)
        (got,) = call(lib.address("adc_kernel_sigmoid_shift"), func, x, np.float32(-1.5))
        assert_close(got, 1 / (1 + np.exp(-(x.astype(np.float64) - 1.5))), np.float32)
    assert load_count() == before + 1


def test_fused_elementwise_loop_uses_vector_registers():
    lib = compile_module(sigmoid_shift())
    assert re.search(r"%[yz]mm\d+", lib.asm()), "no AVX vector register in the sigmoid_shift assembly"
    assert re.search(r"<(8|16) x float>", lib.llvm_ir), "the fused loop was not vectorized"


def test_exports_metadata_and_set_num_threads():
    import ctypes
    lib = compile_module(sigmoid_shift())
    text = ctypes.CFUNCTYPE(ctypes.c_char_p)(lib.address("adc_module_metadata"))()
    assert text == b'{"abi": 1}'
    assert lib.address("adc_set_num_threads") != 0
    assert lib.address("adc_kernel_missing") == 0


def test_a_scan_along_a_leading_axis_runs_its_rows_as_vector_loops():
    # out[k, :] = out[k-1, :] + x[k, :]: the inner loop is contiguous in both
    module = kernel("x: f32[N,M]", lambda b, x: b.op("cumsum", x, axis=0, exclusive=False, reverse=False),
                    name="scan_rows")
    lib = compile_module(module)
    assert re.search(r"<(8|16) x float>", lib.llvm_ir), "the scan's rows were not vectorized"
    x = randn(5, 33)
    (got,) = call(lib.address("adc_kernel_scan_rows"), module["scan_rows"], x)
    np.testing.assert_array_equal(got, np.cumsum(x, axis=0))


def test_a_library_exports_the_global_symbols_its_object_defines():
    """The JIT linker gives addresses for the names asked for when it links: those the object
    defines (read from its ELF symbol table), not the names it only calls, nor its internal ones."""
    from adc.codegen import emit
    from adc.codegen.toolchain import jit
    from adc.codegen.lowering.lower import lower_module
    from adc.codegen.toolchain.target import Target

    target = Target.host(pic=True)
    code = emit.emit_object(lower_module(sigmoid_shift(), '{"abi": 1}', target.vector_bits), target)
    names = set(jit.defined_symbols(code))
    assert {"adc_kernel_sigmoid_shift", "adc_module_metadata", "adc_set_num_threads"} <= names
    assert not any(n.startswith(("adc_rt_", "adc.")) for n in names)     # called, or internal
    lib = compile_module(sigmoid_shift())
    assert lib.address("adc_kernel_sigmoid_shift") != 0 and lib.address("adc_kernel_nope") == 0
