"""In-process compilation: LLVM IR → optimized machine code in this process, via MCJIT.

The last stage of `adc.jit`: the LLVM module from lower.py is parsed,
verified, optimized for the host `Target` and finalized; the runtime then
reads symbol addresses (`adc_kernel_<f>`, `adc_module_metadata`, ...) and
calls them through ctypes, exactly as it does for a shared object.

    lib = JitLibrary(lower_module(module, metadata), Target.host())
    address = lib.address("adc_kernel_sigmoid_shift")

libc and libm symbols (aligned_alloc, free, pthread_create, ...) resolve from the
process (glibc >= 2.34 has the pthread functions in libc itself).
"""
from __future__ import annotations

import llvmlite.binding as llvm
import llvmlite.ir

from adc.codegen.target import Target

_count = 0


def compile_count() -> int:
    """How many LLVM modules this process has compiled (one compilation serves every size)."""
    return _count


def parse(llvm_ir: llvmlite.ir.Module | str) -> llvm.ModuleRef:
    """Parse and verify LLVM IR text or an llvmlite module."""
    module = llvm.parse_assembly(str(llvm_ir))
    module.verify()
    return module


class JitLibrary:
    """One LLVM module compiled into this process's memory; lives as long as this object."""

    def __init__(self, llvm_ir: llvmlite.ir.Module | str, target: Target):
        global _count
        self.target = target
        module = parse(llvm_ir)
        target.optimize(module)
        self._engine = llvm.create_mcjit_compiler(module, target.new_target_machine())
        self._engine.finalize_object()
        self._module = module
        _count += 1

    @property
    def llvm_ir(self) -> str:
        """The optimized LLVM IR."""
        return str(self._module)

    def asm(self) -> str:
        """The generated assembly for the host."""
        return self.target.target_machine().emit_assembly(self._module)

    def address(self, symbol: str) -> int:
        """The address of an exported function, 0 when the module does not define it."""
        return self._engine.get_function_address(symbol)
