"""How a Kernel gets its VJP kernel: embedded in its shared object, or derived from its IR.

Every compiled module carries the IR it was compiled from (the `ir` field of its
metadata) and says where its VJPs come from (`gradients`, see adc/abi.py):

- `derived` (the JIT): `derive(kernel)` asks the driver for the kernel's VJP
  (`driver.derive`: the adjoint pass on the module's IR, JIT-compiled, kept in the
  on-disk cache) and wraps the library it returns like any module. That module is
  `derived` too, so nested tapes get second and third derivatives.
  While one tape records a call of such a kernel, `split(kernel, wanted)` gives the
  tape the kernel's VJP in two halves (passes/split_vjp.py): a forward returning the
  results and residuals, run instead of the kernel, and a backward reading them, so
  `gradient()` does not compute the forward again.
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

Each kernel holds its module's GradientSource (`Kernel.gradient_source`) and keeps
what it derives in its own cache (`Kernel.derived`, adc/runtime/derivative_cache.py).
The driver is imported on first use, so loading a shared object needs neither it nor llvmlite.
"""
from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field
from typing import Callable

from adc import locks
from adc.abi import GRADIENTS_DERIVED, GRADIENTS_EMBEDDED, GRADIENTS_NONE, ModuleInfo, SparseEntry
from adc.errors import CompileError
from adc.runtime.derivative_cache import DerivativeCache

_lock = locks.lock(reentrant=True)


@dataclass(frozen=True)
class Derivative:
    """A kernel's VJP (or tangents-only JVP) for some of its params.

    `kernel` maps (primal args, one cotangent per result) to the cotangents of the params in
    `wrt`; `passthrough[i]`, when not None, says the i-th of those is simply the cotangent of
    that result (the VJP of `x + y` or of a reshape-free identity): the tape then uses it as is,
    with no call — the same tensor, so an enclosing tape still sees the connection. A JVP maps
    (primal args, the tangents of `wrt`) to the float results' tangents, and `passthrough[i]` names
    the `wrt` param whose tangent the i-th is.
    """

    kernel: object | None
    wrt: tuple[int, ...]
    passthrough: tuple[int | None, ...]
    needs_call: bool = field(init=False, compare=False)     # read once per call in every backward walk

    def __post_init__(self):
        object.__setattr__(self, "needs_call", any(p is None for p in self.passthrough))


NONE = Derivative(None, (), ())


@dataclass(frozen=True)
class CompiledSparse:
    """A sparse Jacobian or Hessian a shared object holds (abi.SparseEntry `entry`): its `kernel`,
    filling the nonzeros in CSC order, and its pattern read from the file (`colptr`, `rowind`)."""

    entry: SparseEntry
    kernel: object
    colptr: object
    rowind: object


class GradientSource:
    """Where the kernels of one loaded module get their VJPs, each kernel holding it: what the
    module's metadata `info` says (the IR it carries, how its VJPs come), the embedded VJPs by
    kernel name (`embed`) and why a kernel has none (`missing`); `open_module(library, origin)`
    is the loader that opens the libraries of derivatives compiled from its IR; the sparse
    derivatives the module holds by (kernel name, wrt, hessian) (`sparse`)."""

    def __init__(self, origin: str, info: ModuleInfo, open_module: Callable):
        self.origin = origin
        self.info = info
        self.open_module = open_module
        self.embedded: dict[str, Derivative] = {}
        self.missing = {v.of: v.missing for v in info.vjps if v.missing}
        self.derived = DerivativeCache()
        self.sparse: dict[tuple[str, int, bool], CompiledSparse] = {}

    def embed(self, vjp_kernels: dict[str, object]) -> None:
        """Take the module's embedded VJP kernels by name, once the loader has wrapped them (as
        kernels of this module, they hold this source: their own VJPs come from its IR)."""
        self.embedded = {v.of: Derivative(vjp_kernels[v.kernel.name], v.wrt, v.passthrough) if v.kernel else NONE
                         for v in self.info.vjps if not v.missing}

    def parsed_ir(self):
        """The IR module the library was compiled from, parsed once (for analyses of it)."""
        return self.derived.get("parsed_ir", None, self._parse)

    def _parse(self):
        from adc.ir.parser import parse_module      # lark: only analyses need it

        return parse_module(self.info.ir, self.info.name)


def derive(kernel, wanted: tuple[int, ...] | None = None) -> Derivative:
    """The Derivative of `kernel` for the `wanted` params (default all); NONE when none of
    them receives a cotangent. LookupError when the module cannot give one."""
    embedded = embedded_derivative(kernel)
    if embedded is not None:
        return embedded
    return compiled(kernel, "vjp", wanted, "the module embeds first-order VJP kernels only; higher "
                                           "orders are compiled from the IR it carries")


def embedded_derivative(kernel) -> Derivative | None:
    """The kernel's embedded VJP (for all its params: it covers every request), or None when it
    is to be derived from the module's IR; LookupError when its module says it has none (built
    with --no-gradients, or no VJP could be built). Anything deriving from IR asks this first."""
    source = kernel.gradient_source
    if source.info.gradients not in (GRADIENTS_EMBEDDED, GRADIENTS_NONE):
        return None
    name = kernel.signature.name
    if source.info.gradients == GRADIENTS_NONE:
        raise LookupError(f"No gradient defined for kernel '{name}' in {source.origin}: it was compiled "
                          f"with --no-gradients; recompile without it: "
                          f"adc compile {source.info.name} -o {source.origin}")
    if name in source.missing:
        raise LookupError(f"No gradient defined for kernel '{name}' in {source.origin}: {source.missing[name]}")
    return source.embedded.get(name)


def compiled(kernel, derivation: str, wanted: tuple[int, ...] | None, why_compiler: str = "") -> Derivative:
    """A derivative of `kernel` (one of compiler.DERIVATIONS: "vjp", "vjp_batched", "jvp", "gradient",
    "jacobian", "jacfwd", "hessian", "hvp", ...) compiled from the IR its module carries, opened
    like any module.
    LookupError, saying `why_compiler` it was needed, when the compiler cannot be imported."""
    source = kernel.gradient_source
    try:
        _driver()
    except ImportError as err:
        raise LookupError(f"No gradient defined for kernel '{kernel.signature.name}' in {source.origin}: "
                          f"{why_compiler or 'it is compiled from the IR the module carries'}, which needs "
                          f"the adc compiler's dependencies ({err})") from None
    derived, module = _open_derived(source, kernel, derivation, wanted)
    if not derived.wrt:
        return NONE
    return Derivative(None if module is None else module[derived.function], derived.wrt, derived.passthrough)


def shippable(derivative: Derivative, again: Callable, kernel, *request) -> Derivative:
    """`derivative`, its kernel pickled as `again(kernel, *request)`. It holds its base kernel
    weakly: the base kernel's cache (`derived`) holds it, and a strong reference back would make a
    cycle that only the garbage collector frees (with the native libraries it holds)."""
    if derivative.kernel is not None:
        derivative.kernel.recipe = functools.partial(_recipe, again, weakref.ref(kernel), request)
    return derivative


def _recipe(again: Callable, kernel: weakref.ref, request: tuple) -> tuple:
    return again, (kernel(), *request)


def _driver():
    from adc import driver      # optional here: a deployment may load .so files only
    driver.require_llvm()
    return driver


def _open_derived(source: GradientSource, kernel, derivation: str, wanted: tuple[int, ...] | None):
    """driver.derive's answer for `kernel`, and its library opened like any module (None: nothing to call)."""
    with _lock:
        derived = _driver().derive(source.info.ir, source.info.name, derivation, kernel.signature.name, wanted,
                                   source.info.check_bounds)
    return derived, None if derived.library is None else source.open_module(derived.library, source.info.name)


def batched_derivative(kernel, wanted: tuple[int, ...]) -> Derivative:
    """The kernel's VJP over a leading seed axis of its cotangents (primal args shared), for the
    `wanted` params: compiled on first use, like Kernel.derivative."""
    return kernel.derived.get("vjp_batched", wanted, lambda: _compiled_batched(kernel, wanted))


def batched_tangents(kernel, wanted: tuple[int, ...]) -> Derivative:
    """The kernel's tangents-only JVP over a leading seed axis of its tangents (primal args shared),
    for the `wanted` params: compiled on first use."""
    return kernel.derived.get("jvp_batched", wanted, lambda: _compiled_batched_tangents(kernel, wanted))


def _compiled_batched_tangents(kernel, wanted: tuple[int, ...]) -> Derivative:
    embedded_derivative(kernel)     # a --no-gradients module raises its LookupError
    return compiled(kernel, "jvp_batched", wanted)


def _compiled_batched(kernel, wanted: tuple[int, ...]) -> Derivative:
    """Batched VJPs are always compiled from the module's IR; a module built without gradients
    refuses (embedded_derivative raises its LookupError) rather than falling back to it."""
    embedded_derivative(kernel)
    return compiled(kernel, "vjp_batched", wanted,
                    "vectorized Jacobians are compiled from the IR the module carries (pass "
                    "experimental_use_pfor=False to use the embedded VJP kernels one seed at a time)")


@dataclass(frozen=True)
class Split:
    """A kernel's VJP in two halves: `forward` takes the kernel's args and returns its
    `n_results` results, then the residuals; `backward` takes the args, the residuals, then the
    results' cotangents. `same_dims`: the backward binds the forward's dimension symbols, in
    its order, so a backward walk runs it on the sizes the forward call bound (Kernel.run_bound)."""

    forward: object
    backward: Derivative
    n_results: int
    same_dims: bool = False


def split(kernel, wanted: tuple[int, ...]) -> Split | None:
    """The split VJP of `kernel` for the `wanted` params, its backward compiling ahead (a tape
    records to differentiate), or None where there is none to give: a shared object's kernel (its
    embedded VJPs need no compiler), no compiler installed, or a kernel the adjoint pass rejects (the
    tape's gradient() then reports it). Where the VJP calls nothing (it passes its cotangents
    through, as an add's, or none reaches a param) the forward is the kernel itself, and the backward
    walk finds that on the node instead of asking the kernel again at every gradient."""
    source = kernel.gradient_source
    if source.info.gradients != GRADIENTS_DERIVED:
        return None
    try:
        derived, module = _open_derived(source, kernel, "split_vjp", wanted)
    except (ImportError, CompileError):
        return None
    n_results = len(kernel.signature.result_types)
    if module is None:
        return Split(kernel, Derivative(None, derived.wrt, derived.passthrough) if derived.wrt else NONE, n_results)
    backward, forward = module[derived.function], module[derived.forward]
    # the backward compiles in a child while the forward compiles here (both in tiers)
    derived.library.compile_ahead(backward.signature.symbol, (forward.signature.symbol,))
    return Split(forward, Derivative(backward, derived.wrt, derived.passthrough), n_results,
                 backward.signature.dims == kernel.signature.dims)

