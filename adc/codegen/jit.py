"""In-process loading: object code → executable memory in this process, via MCJIT.

One of the JIT's two loaders (the other, dynamic.py, maps the shared objects the
driver links from the same object code): object code from emit.py or from the
on-disk cache is linked into this process by an MCJIT engine of its own; the
runtime then reads symbol addresses (`adc_kernel_<f>`, `adc_module_metadata`,
...) and calls them through ctypes, exactly as it does for a shared object. No
LLVM optimization or code generation happens here.

    publish(runtime_addresses)          # once per process: gemm, thread pool (see driver.py)
    lib = JitLibrary(emit_object(llvm_module, target), target)
    address = lib.address("adc_kernel_sigmoid_shift")

Symbols resolve from the runtime library (published by `publish`), then from the
process: libc and libm (aligned_alloc, free, pthread_create, ...; glibc >= 2.34
has the pthread functions in libc itself) and the libraries of external
functions (externs.py loads them first).
"""
from __future__ import annotations

import llvmlite.binding as llvm

from adc.codegen.target import Target


def publish(addresses: dict[str, int]) -> None:
    """Tell LLVM's linker where the runtime library's functions are, before a module calling them
    is loaded."""
    for name, address in addresses.items():
        llvm.add_symbol(name, address)


class JitLibrary:
    """Object code linked into this process's memory; lives as long as this object."""

    def __init__(self, object_code: bytes, target: Target):
        self.target = target
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target.new_target_machine())
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
        self._engine.finalize_object()

    def address(self, symbol: str) -> int:
        """The address of an exported function, 0 when the module does not define it."""
        return self._engine.get_function_address(symbol)
