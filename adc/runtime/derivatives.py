"""How a Kernel gets its VJP kernel: embedded in its shared object, or derived from its IR.

Every compiled module carries the IR it was compiled from (the `ir` field of its
metadata) and says where its VJPs come from (`gradients`, see adc/abi.py):

- `derived` (the JIT): `derive(kernel)` parses the IR (once per module), runs the
  adjoint pass (adc/passes/adjoint.py) on the kernel's function and JIT-compiles a
  module holding just the VJP function. That module is `derived` too, so nested
  tapes get second and third derivatives.
- `embedded` (`adc compile`): the VJP kernel of each kernel, w.r.t. all its float
  params, is in the .so; it covers every request (a tape asking for fewer params
  ignores the extra cotangents), so first derivatives need no compiler. A VJP
  kernel's own VJP (a second derivative) is derived from the IR the .so carries
  (it holds the VJP functions too) — when the compiler is installed.
- `none` (`adc compile --no-gradients`): differentiating raises LookupError saying
  how to recompile. Such a module never falls back to its IR: it was built without
  gradients on purpose, and a fresh process may have no compiler.

    derive(m.square)    # square(x: f32[N]) -> f32[N]
                        #   ==> (square_vjp(x: f32[N], ct: f32[N]) -> f32[N], wrt=(0,))

The compiler is imported here, on first use, so loading a shared object does not need it.
"""
from __future__ import annotations

import ctypes
import threading
import weakref
from dataclasses import dataclass

from adc.abi import GRADIENTS_EMBEDDED, GRADIENTS_NONE, METADATA_SYMBOL, ModuleInfo, decode_metadata

_parsed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # native library -> IR Module
_sources: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # native library -> GradientSource
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


@dataclass(frozen=True)
class GradientSource:
    """What a loaded module's metadata says about its VJPs: the embedded ones by kernel name,
    and why a kernel has none (`missing`)."""

    origin: str
    info: ModuleInfo
    embedded: dict[str, Derivative]
    missing: dict[str, str]


def register(library, origin: str, info: ModuleInfo, vjp_kernels: dict[str, object]) -> None:
    """Remember where the kernels of `library` get their VJPs (`vjp_kernels`: the embedded
    VJP kernels by name, wrapped by the loader)."""
    embedded = {v.of: Derivative(vjp_kernels[v.kernel.name], v.wrt, v.passthrough) if v.kernel else NONE
                for v in info.vjps if not v.missing}
    missing = {v.of: v.missing for v in info.vjps if v.missing}
    with _lock:
        _sources[library] = GradientSource(origin, info, embedded, missing)


def derive(kernel, wanted: tuple[int, ...] | None = None) -> Derivative:
    """The Derivative of `kernel` for the `wanted` params (default all); NONE when none of
    them receives a cotangent. LookupError when the module cannot give one."""
    embedded = embedded_derivative(kernel)
    if embedded is not None:
        return embedded
    try:
        return _derive_from_ir(kernel, wanted)
    except ImportError as err:
        raise LookupError(f"No gradient defined for kernel '{kernel.signature.name}' in "
                          f"{_sources[kernel._owner].origin}: the module embeds first-order VJP kernels "
                          f"only; higher orders are compiled from the IR it carries, which needs the adc "
                          f"compiler's dependencies ({err})") from None


def embedded_derivative(kernel) -> Derivative | None:
    """The kernel's embedded VJP (for all its params: it covers every request), or None when it
    is to be derived from the module's IR; LookupError when its module says it has none (built
    with --no-gradients, or no VJP could be built). Anything deriving from IR asks this first."""
    source = _sources.get(kernel._owner)
    if source is None or source.info.gradients not in (GRADIENTS_EMBEDDED, GRADIENTS_NONE):
        return None
    name = kernel.signature.name
    if source.info.gradients == GRADIENTS_NONE:
        raise LookupError(f"No gradient defined for kernel '{name}' in {source.origin}: it was compiled "
                          f"with --no-gradients; recompile without it: "
                          f"adc compile {source.info.name} -o {source.origin}")
    if name in source.missing:
        raise LookupError(f"No gradient defined for kernel '{name}' in {source.origin}: {source.missing[name]}")
    return source.embedded.get(name)


def _derive_from_ir(kernel, wanted: tuple[int, ...] | None) -> Derivative:
    from adc.passes.adjoint import vjp

    with _lock:
        module, gradient = vjp(_module_ir(kernel._owner), kernel.signature.name, wanted)
        return compiled_derivative(module, gradient.func, gradient.wrt, len(kernel.signature.result_types))


def compiled_derivative(module, func, wrt: tuple[int, ...], n_results: int) -> Derivative:
    """The Derivative whose kernel is `func` of `module` (a VJP from the passes), JIT-compiled with
    the functions it calls unless it only passes cotangents through."""
    from adc import driver

    if not wrt:
        return NONE
    through = passthrough(func, n_results)
    compiled = driver.jit(module.reachable(func.name)) if None in through else None
    return Derivative(compiled[func.name] if compiled else None, tuple(wrt), through)


def passthrough(vjp_func, n_results: int) -> tuple[int | None, ...]:
    """For each value a VJP function returns: the index of the result cotangent it is, or None."""
    cotangents = vjp_func.params[len(vjp_func.params) - n_results:]
    return tuple(cotangents.index(v) if v in cotangents else None for v in vjp_func.returns)


def _module_ir(library):
    """The IR module a native library was compiled from, parsed once."""
    from adc.ir.parser import parse_module

    if library not in _parsed:
        read = ctypes.CFUNCTYPE(ctypes.c_char_p)(library.address(METADATA_SYMBOL))
        info = decode_metadata(read().decode("utf-8"))
        _parsed[library] = parse_module(info.ir, info.name)
    return _parsed[library]
