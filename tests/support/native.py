"""Test-only: compile LLVM or IR modules into this process the way the driver does, and call them.

`CompiledLLVM` keeps the optimized LLVM IR and assembly next to the loaded code,
so codegen tests can check what LLVM made of a module; `compile_module` lowers an
IR module into one; `call` runs one of its kernels through the C ABI on NumPy arrays
(`run` does both for a one-function module); `jit_module` opens an IR module as the
runtime does.
"""
from __future__ import annotations

import ctypes

import llvmlite.ir
import numpy as np

from adc import driver
from adc.codegen import emit
from adc.codegen.lowering.lower import lower_module
from adc.codegen.toolchain.target import Target
from adc.driver.loading import load_object
from adc.ir.core import Func, Module
from adc.ir.types import evaluate_dim
from adc.runtime.module import Module as RuntimeModule

# a kernel's C signature: status kernel(int64_t *dims, void **inputs, void **outputs)
KERNEL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


class CompiledLLVM:
    """An LLVM module compiled for the host and loaded, with its optimized IR and assembly."""

    def __init__(self, llvm_module: llvmlite.ir.Module):
        self.target = Target.host()
        self._text = str(llvm_module)
        self._library = load_object(emit.emit_object(self._text, self.target), self.target)

    def address(self, symbol: str) -> int:
        return self._library.address(symbol)

    @property
    def llvm_ir(self) -> str:
        return emit.emit_llvm(self._text, self.target)

    def asm(self) -> str:
        return emit.emit_assembly(self._text, self.target)


def compile_module(module: Module) -> CompiledLLVM:
    """The IR module lowered for the host's vector width and compiled, no runtime in between."""
    return CompiledLLVM(lower_module(module, '{"abi": 1}', Target.host().vector_bits))


def _sizes(func: Func, args) -> dict[str, int]:
    """The dimension symbols of `func`'s params, bound to the sizes of `args`."""
    env: dict[str, int] = {}
    for p, a in zip(func.params, args):
        for d, n in zip(p.type.shape, np.shape(a)):
            if not isinstance(d, int) and d.is_symbol:
                env[str(d)] = n
    return env


def call(address: int, func: Func, *args) -> list[np.ndarray]:
    """Run the kernel at `address` on NumPy arrays; returns its freshly allocated outputs."""
    inputs = [np.ascontiguousarray(a, dtype=p.type.dtype.numpy) for p, a in zip(func.params, args)]
    env = _sizes(func, inputs)
    dims = np.array([env[s] for s in func.dim_symbols] or [0], dtype=np.int64)
    outputs = [np.empty(tuple(evaluate_dim(d, env) for d in t.shape), t.dtype.numpy) for t in func.result_types]
    ins = (ctypes.c_void_p * max(1, len(inputs)))(*[a.ctypes.data for a in inputs])
    outs = (ctypes.c_void_p * len(outputs))(*[o.ctypes.data for o in outputs])
    assert KERNEL(address)(dims.ctypes.data, ins, outs) == 0
    return outputs


def run(module: Module, *args) -> list[np.ndarray]:
    """Compile the one-function `module` and run its kernel on `args`."""
    lib = compile_module(module)
    func = next(iter(module))
    return call(lib.address(f"adc_kernel_{func.name}"), func, *args)


def jit_module(module: Module, check_bounds: bool = False) -> RuntimeModule:
    """The IR module compiled in process (bounds-checked when asked) and opened like `adc.compile`'s result."""
    return RuntimeModule(driver.jit(module, check_bounds), module.name)
