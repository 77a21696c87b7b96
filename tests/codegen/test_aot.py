"""The shared-object path: object emission + `cc` link gives the same results as the JIT."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from adc.codegen import emit
from adc.codegen.toolchain import aot
from adc.codegen.lowering.lower import lower_module
from adc.codegen.toolchain.target import Target
from adc.driver.runtime_library import runtime_object
from adc.errors import ToolchainError
from tests.support.ir_kernels import kernel
from tests.support.native import call, compile_module
from tests.support.random_arrays import randn


def dense_relu():
    def body(b, x, w, bias):
        y = b.op("add", b.op("matmul", x, w), b.op("broadcast", bias, dims=[1], shape=[x.type.shape[0], w.type.shape[1]]))
        return b.op("maximum", y, b.op("broadcast", b.op("constant", dtype=x.type.dtype, value=0.0), dims=[],
                                          shape=y.type.shape))
    return kernel("x: f32[B,I], w: f32[I,O], bias: f32[O]", body, name="dense_relu")


def test_linking_leaves_the_warning_filters_alone(tmp_path, monkeypatch):
    """The background linker thread links while the caller's code runs: it must not swap the
    process-wide warning filters, as `warnings.catch_warnings` does (os.get_exec_path, which
    subprocess calls to find a compiler given by a bare name, enters one). It did, and a
    `pytest.warns` in the main thread recorded nothing."""
    import warnings

    target = Target.host(pic=True)
    objects = [emit.emit_object(lower_module(dense_relu(), '{"abi": 1}', target.vector_bits), target),
               runtime_object(target)]
    swaps, real = [], warnings.catch_warnings

    def recorded(*args, **kwargs):
        swaps.append(args)
        return real(*args, **kwargs)
    monkeypatch.setattr(warnings, "catch_warnings", recorded)
    aot.link_shared_object(objects, tmp_path / "dense.so")
    monkeypatch.undo()
    assert swaps == [] and (tmp_path / "dense.so").stat().st_size > 0


def test_shared_object_matches_jit(tmp_path):
    module = dense_relu()
    func = module["dense_relu"]
    path = tmp_path / "dense.so"
    target = Target.host(pic=True)
    objects = [emit.emit_object(lower_module(module, '{"abi": 1}', target.vector_bits), target),
               runtime_object(target)]
    aot.link_shared_object(objects, path)
    so = ctypes.CDLL(str(path))
    so_address = ctypes.cast(so.adc_kernel_dense_relu, ctypes.c_void_p).value
    jit = compile_module(module)
    args = randn(5, 8), randn(8, 3), randn(3)
    (from_so,) = call(so_address, func, *args)
    (from_jit,) = call(jit.address("adc_kernel_dense_relu"), func, *args)
    np.testing.assert_array_equal(from_so, from_jit)
    np.testing.assert_allclose(from_so, np.maximum(args[0].astype(np.float64) @ args[1] + args[2], 0), rtol=1e-5)


def test_assembly_text_names_the_kernel():
    asm = emit.emit_assembly(lower_module(dense_relu(), "{}", Target.host().vector_bits), Target.host())
    assert "adc_kernel_dense_relu:" in asm


def test_link_failure_is_a_toolchain_error(tmp_path):
    with pytest.raises(ToolchainError, match="cc -shared"):
        aot.link_shared_object([b"not an object file"], tmp_path / "broken.so")


def test_missing_cc_is_a_toolchain_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(ToolchainError, match="`cc` .* is not found"):
        aot.link_shared_object([b""], tmp_path / "x.so")


def test_cc_environment_variable_names_the_linker(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler-adc --flag")
    with pytest.raises(ToolchainError, match=r"\$CC \(no-such-compiler-adc\) is not found"):
        aot.link_shared_object([b""], tmp_path / "x.so")


def test_shared_object_exports_only_the_module_symbols(tmp_path):
    """The runtime library is linked in but not exported: two .so files never bind to each other's."""
    target = Target.host(pic=True)
    path = tmp_path / "dense.so"
    aot.link_shared_object([emit.emit_object(lower_module(dense_relu(), '{"abi": 1}', target.vector_bits), target),
                            runtime_object(target)], path)
    so = ctypes.CDLL(str(path))
    assert so.adc_kernel_dense_relu
    with pytest.raises(AttributeError):
        so.adc_rt_gemm_f32


def test_target_key_distinguishes_pic():
    assert Target.host().key() != Target.host(pic=True).key()
