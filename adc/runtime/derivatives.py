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
from dataclasses import dataclass

from adc.abi import METADATA_SYMBOL, decode_metadata

_parsed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # native library -> IR Module
_lock = threading.RLock()


@dataclass(frozen=True)
class Derivative:
    """A kernel's VJP for some of its params.

    `kernel` maps (primal args, one cotangent per result) to the cotangents of the params in
    `wrt`; `passthrough[i]`, when not None, says the i-th of those is simply the cotangent of
    that result (the VJP of `x + y` or of a reshape-free identity): the tape then uses it as is,
    with no call — the same tensor, so an enclosing tape still sees the connection.
    """

    kernel: object | None
    wrt: tuple[int, ...]
    passthrough: tuple[int | None, ...]

    @property
    def needs_call(self) -> bool:
        return any(p is None for p in self.passthrough)


NONE = Derivative(None, (), ())


def derive(kernel, wanted: tuple[int, ...] | None = None) -> Derivative:
    """The Derivative of `kernel` for the `wanted` params (default all); NONE when none of
    them receives a cotangent."""
    from adc import driver
    from adc.ir.core import Module
    from adc.passes.adjoint import vjp

    with _lock:
        module = _module_ir(kernel._owner)
        _, gradient = vjp(module, kernel.signature.name, wanted)
        if not gradient.wrt:
            return NONE
        func = gradient.func
        cotangents = func.params[len(func.params) - len(kernel.signature.result_types):]
        passthrough = tuple(cotangents.index(v) if v in cotangents else None for v in func.returns)
        compiled = driver.jit(Module({func.name: func}, module.name)) if None in passthrough else None
        return Derivative(compiled[func.name] if compiled else None, gradient.wrt, passthrough)


def _module_ir(library):
    """The IR module a native library was compiled from, parsed once."""
    from adc.ir.parser import parse_module

    if library not in _parsed:
        read = ctypes.CFUNCTYPE(ctypes.c_char_p)(library.address(METADATA_SYMBOL))
        info = decode_metadata(read().decode("utf-8"))
        _parsed[library] = parse_module(info.ir, info.name)
    return _parsed[library]
