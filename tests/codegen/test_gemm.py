"""adc_gemm_<dtype> against NumPy float64 matmul, for every register blocking (128-, 256- and
512-bit vectors: LLVM splits vectors wider than the host's, so all three run here).

The harness is minimal on purpose: one llvmlite module per vector width holding both gemm
functions and exported wrappers, optimized at O3 and JIT-compiled for the host
CPU with the JIT linker, called through ctypes.
"""
from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np
import pytest

from adc.codegen.native import few_rows, gemm
from adc.ir.types import DType

DTYPES = (DType.f32, DType.f64)
VECTOR_BITS = (128, 256, 512)

_GEMM_PROTOTYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                   ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                   ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)


class GemmModule:
    """The JIT-compiled test module; `gemm(dtype, a, b)` returns a fresh C."""

    def __init__(self, vector_bits: int) -> None:
        self.vector_bits = vector_bits
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        self.machine = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)
        module = llvm.parse_assembly(str(_build_module(vector_bits)))
        module.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pass_builder = llvm.create_pass_builder(self.machine, pto)
        pass_builder.getModulePassManager().run(module, pass_builder)
        module.verify()
        self.engine = llvm.create_mcjit_compiler(module, self.machine)
        self.engine.finalize_object()
        self.functions = {dtype: _GEMM_PROTOTYPE(self.engine.get_function_address(f"call_gemm_{dtype}"))
                          for dtype in DTYPES}

    def gemm(self, dtype: DType, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None,
             transposed_a: bool = False, transposed_b: bool = False) -> np.ndarray:
        """C = A @ B; with `transposed_a`, A is passed as its row-major transpose and read with swapped
        strides (likewise B). A given C may be a band of columns of a wider matrix (its row stride ldc)."""
        (m, k), (_, n) = a.shape, b.shape
        a = np.ascontiguousarray(a.T if transposed_a else a, dtype.numpy)
        b = np.ascontiguousarray(b.T if transposed_b else b, dtype.numpy)
        rsa, csa = (1, m) if transposed_a else (k, 1)
        rsb, csb = (1, k) if transposed_b else (n, 1)
        c = np.full((m, n), np.nan, dtype.numpy) if c is None else c
        ldc = c.strides[0] // c.itemsize if c.size else n
        self.functions[dtype](m, n, k, a.ctypes.data, rsa, csa, b.ctypes.data, rsb, csb, c.ctypes.data, ldc)
        return c


def _build_module(vector_bits: int) -> ir.Module:
    module = ir.Module(name="test_gemm")
    module.triple = llvm.get_process_triple()
    for dtype in DTYPES:
        callee = gemm.define_gemm(module, gemm.blocking(dtype, vector_bits))
        wrapper = ir.Function(module, callee.function_type, f"call_gemm_{dtype}")
        builder = ir.IRBuilder(wrapper.append_basic_block())
        builder.call(callee, wrapper.args)
        builder.ret_void()
    return module


@pytest.fixture(scope="module", params=VECTOR_BITS, ids=lambda bits: f"{bits}bit")
def jit(request) -> GemmModule:
    return GemmModule(request.param)


SHAPES = [(1, 1, 1), (1, 1, 7), (2, 3, 4), (7, 5, 3), (8, 32, 1), (9, 33, 17), (13, 31, 29),
          (16, 16, 16), (1, 100, 3), (100, 1, 3), (3, 17, 257), (31, 97, 300), (37, 130, 513),
          (14, 19, 5), (64, 64, 64), (97, 201, 61), (256, 10, 512), (17, 67, 600),
          (1, 513, 200), (3, 300, 257), (6, 260, 300)]     # a few rows, B streamed (few_rows.stream_function)


def _tolerance(dtype: DType, k: int) -> float:
    return (2e-6 if dtype == DType.f32 else 1e-14) * max(k, 1) ** 0.5 * 4


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_numpy(jit, dtype, shape):
    m, n, k = shape
    rng = np.random.default_rng(m * 10007 + n * 101 + k)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    a, b = a.astype(dtype.numpy), b.astype(dtype.numpy)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    got = jit.gemm(dtype, a, b)
    assert np.all(np.abs(got - expected) <= _tolerance(dtype, k) * scale + 1e-30)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(7, 5, 3), (13, 31, 29), (31, 97, 300), (97, 201, 61)], ids=str)
@pytest.mark.parametrize("transposed", [(True, False), (False, True), (True, True)], ids=("Ta", "Tb", "TaTb"))
def test_transposed_operands_are_read_in_place(jit, dtype, shape, transposed):
    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    a, b = rng.standard_normal((m, k)).astype(dtype.numpy), rng.standard_normal((k, n)).astype(dtype.numpy)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    got = jit.gemm(dtype, a, b, transposed_a=transposed[0], transposed_b=transposed[1])
    assert np.all(np.abs(got - expected) <= _tolerance(dtype, k) * scale + 1e-30)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(0, 5, 3), (5, 0, 3), (0, 0, 0)])
def test_empty_result_touches_nothing(jit, dtype, shape):
    m, n, k = shape
    memory = np.full(64, 7.0, dtype.numpy)
    jit.gemm(dtype, np.ones((m, k)), np.ones((k, n)), memory[32:32 + m * n].reshape(m, n))
    assert np.all(memory == 7.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_empty_contraction_gives_zeros(jit, dtype):
    got = jit.gemm(dtype, np.ones((5, 0)), np.ones((0, 9)))
    assert got.shape == (5, 9) and np.all(got == 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_writes_stay_inside_c(jit, dtype):
    m, n, k = 11, 37, 300
    rng = np.random.default_rng(0)
    padded = np.full((m * n + 64,), 3.0, dtype.numpy)
    c = padded[32:32 + m * n].reshape(m, n)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    jit.gemm(dtype, a, b, c)
    assert np.all(padded[:32] == 3.0) and np.all(padded[32 + m * n:] == 3.0)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(13, 31, 29), (37, 130, 1030), (6, 260, 600), (5, 9, 0)],
                         ids=("direct", "packed", "streamed", "K=0"))
def test_c_may_be_a_band_of_columns_of_a_wider_matrix(jit, dtype, shape):
    """With ldc > N, C's rows are written ldc elements apart and only within the band: the columns
    either side keep their values, on every path of the kernel (B read in place, packed, streamed)."""
    m, n, k = shape
    rng = np.random.default_rng(m + n + k)
    a, b = rng.standard_normal((m, k)).astype(dtype.numpy), rng.standard_normal((k, n)).astype(dtype.numpy)
    wide = np.full((m, n + 21), 5.0, dtype.numpy)
    band = jit.gemm(dtype, a, b, wide[:, 8:8 + n])
    expected = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert np.all(np.abs(band - expected) <= _tolerance(dtype, k) * scale + 1e-30)
    assert np.all(wide[:, :8] == 5.0) and np.all(wide[:, 8 + n:] == 5.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("transposed_a", [False, True], ids=("A", "Ta"))
def test_a_matrix_vector_product_has_the_bits_of_a_wider_products_column(jit, dtype, transposed_a):
    """One column of B gives, bit for bit, the first column of the product with a second one, which
    the micro-kernels compute: a row-major A by few_rows.matrix_vector_function (rows in a vector's
    lanes, tiles transposed in registers), a transposed one as a row times a row-major matrix
    (few_rows.stream_function); rows around the lanes' count, depths around KC, each sum down its row
    in the same order. A C band (ldc > 1) is written at its stride only."""
    blk = gemm.blocking(dtype, jit.vector_bits)
    lanes = few_rows.MATRIX_VECTOR_ROWS
    rng = np.random.default_rng(7)
    for m in (1, lanes - 1, lanes, lanes + 1, 3 * lanes + 5, 1000):
        for k in (1, lanes - 1, lanes + 1, blk.kc, blk.kc + lanes + 3, 2 * blk.kc + 1):
            a, b = rng.standard_normal((m, k)).astype(dtype.numpy), rng.standard_normal((k, 2)).astype(dtype.numpy)
            both = jit.gemm(dtype, a, b, transposed_a=transposed_a)
            assert np.array_equal(jit.gemm(dtype, a, b[:, :1], transposed_a=transposed_a), both[:, :1]), (m, k)
            wide = np.full((m, 3), 9.0, dtype.numpy)
            band = jit.gemm(dtype, a, b[:, :1], wide[:, 1:2], transposed_a=transposed_a)
            assert np.array_equal(band, both[:, :1]), (m, k)
            assert np.all(wide[:, 0] == 9.0) and np.all(wide[:, 2] == 9.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_and_inf_propagate(jit, dtype):
    m, n, k = 9, 35, 300
    a, b = np.ones((m, k)), np.ones((k, n))
    a[2, 5] = np.nan      # row 2 of C is NaN
    a[4, 7] = np.inf      # row 4 is +inf ...
    b[7, 3] = -1.0        # ... except column 3, where inf * -1 makes -inf
    b[280, 33] = np.inf   # column 33 is +inf, and NaN where -inf meets it
    expected = a @ b
    got = jit.gemm(dtype, a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(expected))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_old_contents_of_c_are_ignored(jit, dtype):
    a, b = np.eye(3), np.arange(12.0).reshape(3, 4)
    c = np.full((3, 4), np.nan, dtype.numpy)
    np.testing.assert_array_equal(jit.gemm(dtype, a, b, c), b)


def test_kernel_modules_declare_the_runtime_gemm_once_per_dtype():
    module = ir.Module()
    first = gemm.declare_gemm(module, DType.f32)
    assert first.is_declaration and first.name == "adc_rt_gemm_f32"
    assert gemm.declare_gemm(module, DType.f32) is first
    assert gemm.declare_gemm(module, DType.f64) is not first


@pytest.mark.parametrize("dtype, bits", [(DType.i32, 256), (DType.f32, 1024)])
def test_unsupported_blockings_are_rejected(dtype, bits):
    with pytest.raises(ValueError, match="f32 and f64 with 128-, 256- or 512-bit vectors"):
        gemm.blocking(dtype, bits)


@pytest.mark.parametrize("blk", gemm.BLOCKINGS.values(), ids=lambda b: f"{b.dtype}-{b.vl}lanes")
def test_blockings_fit_the_register_file(blk):
    """Accumulators + panel vectors + one broadcast within the registers of that width; the packed
    block a whole number of panels."""
    registers = 32 if blk.vl * blk.elem_align * 8 == 512 else 16
    assert blk.mr * blk.vectors_per_row + blk.vectors_per_row + 1 <= registers
    assert blk.nr % blk.vl == 0 and blk.nc % blk.nr == 0
