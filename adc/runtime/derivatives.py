"""How a Kernel gets its VJP kernel: module IR text → `vjp` pass → compiled module.

Every compiled module carries the IR it was compiled from (the `ir` field of its
metadata, for the JIT and for shared objects alike). `derive(kernel)` parses it
(once per module), runs the adjoint pass (adc/passes/adjoint.py) on the kernel's
function, and JIT-compiles a module holding just the VJP function. That module
carries its own IR, so the VJP kernel is differentiated the same way: nested
tapes get second and third derivatives.

    derive(m.square)    # square(x: f32[N]) -> f32[N]
                        #   ==> (square_vjp(x: f32[N], ct: f32[N]) -> f32[N], wrt=(0,))

The compiler is imported here, on first use, so loading a shared object does not need it.
"""
from __future__ import annotations

import ctypes
import threading
import weakref

from adc.abi import METADATA_SYMBOL, decode_metadata

_parsed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # native library -> IR Module
_lock = threading.RLock()


def derive(kernel, wanted: tuple[int, ...] | None = None):
    """(VJP Kernel, wrt) of `kernel` for the `wanted` params (default all); (None, ()) when none
    of them receives a cotangent."""
    from adc import driver
    from adc.ir.core import Module
    from adc.passes.adjoint import vjp

    with _lock:
        module = _module_ir(kernel._owner)
        _, gradient = vjp(module, kernel.signature.name, wanted)
        if not gradient.wrt:
            return None, ()
        compiled = driver.jit(Module({gradient.func.name: gradient.func}, module.name))
        return compiled[gradient.func.name], gradient.wrt


def _module_ir(library):
    """The IR module a native library was compiled from, parsed once."""
    from adc.ir.parser import parse_module

    if library not in _parsed:
        read = ctypes.CFUNCTYPE(ctypes.c_char_p)(library.address(METADATA_SYMBOL))
        info = decode_metadata(read().decode("utf-8"))
        _parsed[library] = parse_module(info.ir, info.name)
    return _parsed[library]
