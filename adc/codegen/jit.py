"""In-process loading: object code → executable memory in this process, via MCJIT.

The last stage of the JIT: object code from emit.py (or from the on-disk cache)
is linked into this process by an MCJIT engine of its own; the runtime then
reads symbol addresses (`adc_kernel_<f>`, `adc_module_metadata`, ...) and calls
them through ctypes, exactly as it does for a shared object. No LLVM
optimization or code generation happens here.

    install_runtime(runtime_object, target)   # once per process: gemm, thread pool
    lib = JitLibrary(emit_object(llvm_module, target), target)
    address = lib.address("adc_kernel_sigmoid_shift")

Symbols resolve from the runtime library (published by `install_runtime`), then
from the process: libc and libm (aligned_alloc, free, pthread_create, ...; glibc
>= 2.34 has the pthread functions in libc itself) and the libraries of external
functions (externs.py loads them first).
"""
from __future__ import annotations

import threading

import llvmlite.binding as llvm

from adc.codegen.target import Target

_count = 0
_runtime: llvm.ExecutionEngine | None = None
_runtime_lock = threading.Lock()


def load_count() -> int:
    """How many object files this process has linked in (a kernel is loaded once for every size)."""
    return _count


def _engine(object_code: bytes, target: Target) -> llvm.ExecutionEngine:
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target.new_target_machine())
    engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
    engine.finalize_object()
    return engine


def runtime_installed() -> bool:
    return _runtime is not None


def runtime_address(symbol: str) -> int:
    """The address of a runtime library function (after `install_runtime`)."""
    return _runtime.get_function_address(symbol)


def install_runtime(object_code: bytes, target: Target, symbols: tuple[str, ...]) -> None:
    """Load the runtime library's object code once for this process and publish `symbols`,
    so JIT modules loaded afterwards call them. Later calls do nothing."""
    global _runtime
    with _runtime_lock:
        if _runtime is not None:
            return
        engine = _engine(object_code, target)
        for name in symbols:
            address = engine.get_function_address(name)
            if not address:
                raise RuntimeError(f"the adc runtime library does not define {name}")
            llvm.add_symbol(name, address)
        _runtime = engine     # lives as long as the process: every JIT module calls into it


class JitLibrary:
    """One module's object code linked into this process's memory; lives as long as this object."""

    def __init__(self, object_code: bytes, target: Target):
        global _count
        if _runtime is None:
            raise RuntimeError("install_runtime() must run before a JIT module is loaded")
        self.target = target
        self._engine = _engine(object_code, target)
        _count += 1

    def address(self, symbol: str) -> int:
        """The address of an exported function, 0 when the module does not define it."""
        return self._engine.get_function_address(symbol)
