"""Test-only: compile LLVM or IR modules into this process the way the driver does.

`CompiledLLVM` keeps the optimized LLVM IR and assembly next to the loaded code,
so codegen tests can check what LLVM made of a module; `jit_module` opens an IR
module as the runtime does.
"""
from __future__ import annotations

import llvmlite.ir

from adc import driver
from adc.codegen import emit
from adc.codegen.target import Target
from adc.ir.core import Module
from adc.runtime.module import Module as RuntimeModule


class CompiledLLVM:
    """An LLVM module compiled for the host and loaded, with its optimized IR and assembly."""

    def __init__(self, llvm_module: llvmlite.ir.Module):
        self.target = Target.host()
        self._text = str(llvm_module)
        self._library = driver.load_object(emit.emit_object(self._text, self.target), self.target)

    def address(self, symbol: str) -> int:
        return self._library.address(symbol)

    @property
    def llvm_ir(self) -> str:
        return emit.emit_llvm(self._text, self.target)

    def asm(self) -> str:
        return emit.emit_assembly(self._text, self.target)


def jit_module(module: Module, check_bounds: bool = False) -> RuntimeModule:
    """The IR module compiled in process (bounds-checked when asked) and opened like `adc.compile`'s result."""
    return RuntimeModule(driver.jit(module, check_bounds), module.name)
