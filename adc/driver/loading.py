"""Kernels loaded into this process, after the runtime library they call.

Object code goes through the JIT linker (codegen/toolchain/jit.py), which must know the runtime
library's functions first: they are published to it once per process. A kernel's cached shared
object is mapped by the dynamic loader (codegen/toolchain/dynamic.py), binding to the runtime
library's global symbols. Loads are counted, so tests can tell a kernel loaded once per size.

    load_object(object_code, target)    # a JitLibrary
    open_shared(path)                   # a DynamicLibrary; OSError if the file went meanwhile
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from adc import locks
from adc.abi import runtime_symbols
from adc.driver.runtime_library import require, runtime_library

if TYPE_CHECKING:       # imported where a kernel is loaded (see the package docstring)
    from adc.codegen.toolchain.dynamic import DynamicLibrary
    from adc.codegen.toolchain.jit import JitLibrary
    from adc.codegen.toolchain.target import Target

_published = False              # whether LLVM's linker knows the runtime library's functions
_publish_lock = locks.lock()
_loads = 0


def load_count() -> int:
    """How many kernels this process has loaded (a kernel is loaded once for every size)."""
    return _loads


def load_object(object_code: bytes, target: Target) -> JitLibrary:
    """Link object code into this process (jit.py), after the runtime library it calls."""
    global _loads, _published
    from adc.codegen.toolchain import jit

    runtime = runtime_library()
    with _publish_lock:
        if not _published:
            jit.publish({name: require(runtime, name) for name in runtime_symbols()})
            _published = True
    _loads += 1
    return jit.JitLibrary(object_code, target)


def open_shared(path) -> DynamicLibrary:
    """Map a kernel's shared object (its runtime library loaded as a shared object first)."""
    global _loads
    from adc.codegen.toolchain.dynamic import DynamicLibrary

    library = DynamicLibrary(path)
    _loads += 1
    return library
