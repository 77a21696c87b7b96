"""adc.grad, adc.jacobian, adc.jacfwd, adc.hessian, adc.hvp and adc.jvp: derivatives of a
compiled kernel, no tape needed.

Each compiles one function that adc/passes/jacobian.py (or the JVP pass) composes
from the kernel's IR (the module carries it) and returns it as an ordinary Kernel:
it checks its arguments, records on tapes, and can be transformed again.

    m = adc.compile("def loss(w: f64[N], x: f64[N]) -> f64:\\n    return sum(tanh(w * x))\\n")
    dloss = adc.grad(m.loss, wrt="w")      # loss_grad(w, x) -> f64[N]
    h = adc.hessian(m.loss)                # loss_hessian(w, x) -> f64[N,N], forward-over-reverse
    jx = adc.jacobian(dloss, wrt="x")      # d(dloss/dw)/dx -> f64[N,N]
    hv = adc.hvp(m.loss, wrt="w")          # loss_hvp(w, x, dw) -> H·dw, H never formed
    y, dy = adc.jvp(m.loss, (w, x), (dw, None))    # forward mode: loss and its derivative along dw

The Jacobians and the Hessian take `mode`: "reverse" pulls one seed per result element back
(VJPs), "forward" pushes one seed per parameter element forward (JVPs); "auto" (the default)
takes forward mode for a parameter with fewer elements than the result (a dimension symbol
counted as 1000 elements: adc.passes.jacobian.forward_is_cheaper). The Hessian is
forward-over-reverse unless mode="reverse".

`wrt` is a parameter index or name, or a sequence of them (default: every float
parameter); the derivative kernel returns one result per entry, zeros for a
parameter the result does not depend on. A kernel from a --no-gradients .so
refuses with its LookupError, as a tape would.
"""
from __future__ import annotations

import functools
import weakref

import numpy as np

from adc.runtime.derivatives import compiled, embedded_derivative
from adc.runtime.kernel import Kernel
from adc.runtime.tensor import Tensor, constant

MODES = ("auto", "forward", "reverse")
# (transform, mode) -> compiler.DERIVATIONS
DERIVATIONS = {("grad", None): "gradient", ("value_and_grad", None): "value_and_gradient", ("hvp", None): "hvp", ("jvp", None): "jvp",
               ("jacobian", "auto"): "jacobian", ("jacobian", "forward"): "jacfwd",
               ("jacobian", "reverse"): "jacrev", ("hessian", "auto"): "hessian",
               ("hessian", "forward"): "hessian", ("hessian", "reverse"): "hessian_reverse",
               ("batch_jacobian", "auto"): "batch_jacobian", ("batch_jacobian", "forward"): "batch_jacfwd",
               ("batch_jacobian", "reverse"): "batch_jacrev"}


def grad(kernel: Kernel, wrt=None) -> Kernel:
    """The kernel (x...) -> (d result / d x_i for i in wrt) of a kernel with one scalar float result."""
    return transformed("grad", kernel, wrt)


def value_and_grad(kernel: Kernel, wrt=None) -> Kernel:
    """The kernel (x...) -> (result, d result / d x_i for i in wrt) of a kernel with one scalar float
    result (jax.value_and_grad): one call, the forward work the two share done once."""
    return transformed("value_and_grad", kernel, wrt)


def jacobian(kernel: Kernel, wrt=None, mode: str = "auto") -> Kernel:
    """The kernel (x...) -> (J_i for i in wrt), J_i of shape result.shape + x_i.shape, of a kernel
    with one float result; `mode` "auto", "forward" or "reverse" (see the module's docstring)."""
    return transformed("jacobian", kernel, wrt, _mode("jacobian", mode))


def jacfwd(kernel: Kernel, wrt=None) -> Kernel:
    """adc.jacobian in forward mode (jax.jacfwd): one JVP per parameter element, batched."""
    return jacobian(kernel, wrt, mode="forward")


def batch_jacobian(kernel: Kernel, wrt=0, mode: str = "auto") -> Kernel:
    """The kernel (x...) -> J, J[b] = d result[b] / d x[b] of shape [B, *result.shape[1:],
    *x.shape[1:]] (GradientTape.batch_jacobian, jax.vmap(jax.jacfwd(f)) of a per-example f), for one
    parameter `wrt` sharing its leading example axis with the single float result; a kernel whose
    examples mix is refused. `mode`: "auto" (forward when an example has fewer input than output
    elements), "forward" or "reverse"."""
    _one_parameter("batch_jacobian", wrt)
    return transformed("batch_jacobian", kernel, wrt, _mode("batch_jacobian", mode))


def hessian(kernel: Kernel, wrt=0, mode: str = "auto") -> Kernel:
    """The kernel (x...) -> d² result / d x², of shape x.shape + x.shape, for one parameter `wrt`
    of a kernel with one scalar float result: forward-over-reverse, or reverse-over-reverse with
    mode="reverse"."""
    _one_parameter("hessian", wrt)
    return transformed("hessian", kernel, wrt, _mode("hessian", mode))


def hvp(kernel: Kernel, wrt=0) -> Kernel:
    """The kernel (x..., v) -> H·v, H the Hessian of a kernel with one scalar float result w.r.t.
    its parameter `wrt` and v of that parameter's type: the JVP of the gradient (forward-over-
    reverse), at the cost of a few gradients, H never formed."""
    _one_parameter("hvp", wrt)
    return transformed("hvp", kernel, wrt)


def jvp(kernel: Kernel, primals, tangents):
    """Forward mode, as jax.jvp: (outputs, output tangents) of `kernel` at `primals` along
    `tangents` — one per parameter, None for a parameter that does not move (integer parameters
    take None). The outputs are what `kernel(*primals)` returns; the tangents mirror them, None
    for an integer output. Both are Tensors recorded on any active tape."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"adc.jvp: expects a compiled adc kernel (e.g. module.f), got {type(kernel).__name__}")
    sig = kernel.signature
    primals, tangents = _aligned(sig, "primals", primals), _aligned(sig, "tangents", tangents)
    for name, t, tangent in zip(sig.param_names, sig.param_types, tangents):
        if tangent is not None and not t.dtype.is_float:
            raise TypeError(f"adc.jvp: parameter '{name}' of {sig.name} is {t}; give None as its tangent")
    wanted = tuple(i for i, tangent in enumerate(tangents) if tangent is not None)
    embedded_derivative(kernel)     # a --no-gradients module raises its LookupError
    derivative = kernel.derived.get("jvp", wanted, lambda: compiled(kernel, "jvp", wanted)) if wanted else None
    n = len(sig.result_types)
    if derivative is None or derivative.kernel is None:
        outputs = kernel(*primals)
        outputs = (outputs,) if n == 1 else tuple(outputs)
        moved = [_zeros_like(o) if t.dtype.is_float else None for o, t in zip(outputs, sig.result_types)]
    else:
        both = derivative.kernel(*primals, *(tangents[i] for i in derivative.wrt))
        outputs, moving = tuple(both[:n]), iter(both[n:])
        moved = [next(moving) if t.dtype.is_float else None for t in sig.result_types]
    return (outputs[0], moved[0]) if n == 1 else (outputs, tuple(moved))


def batched(kernel: Kernel, params: tuple[int, ...]) -> Kernel:
    """`kernel` over a new leading axis (a dimension symbol of its own) of the params `params`, the
    others shared by every example; every result gets the axis. One call runs the batch: the
    batching pass's kernel (vmap), compiled once per (kernel, params), which the PyTorch and JAX
    bridges run their vmap rules with."""
    return kernel.derived.get("batched", params, lambda: compiled(kernel, "batched", params)).kernel


def tangent_derivative(kernel: Kernel, wanted: tuple[int, ...]):
    """The kernel's tangents-only JVP for the `wanted` params, compiled once: a
    derivatives.Derivative whose kernel maps (primals, tangents of wrt) to the float results'
    tangents (ForwardAccumulator pushes tangents with it)."""
    embedded_derivative(kernel)     # a --no-gradients module raises its LookupError
    return kernel.derived.get("jvp_tangents", wanted, lambda: compiled(kernel, "jvp_tangents", wanted))


def pushed(derivative, primals, moving: list) -> tuple:
    """The float results' tangents from a tangents-only JVP `derivative` (tangent_derivative, or a
    batched one): its kernel's call on the primals and the tangents of its `wrt` params (`moving`,
    one entry per param), or, when it returns those tangents unchanged (the JVP of `x + y` in x), those
    very tensors, with no call: an enclosing tape still sees them connected."""
    if derivative.needs_call:
        outs = derivative.kernel(*primals, *(moving[i] for i in derivative.wrt))
        return outs if type(outs) is tuple else (outs,)
    return tuple(moving[derivative.wrt[p]] for p in derivative.passthrough)


def _aligned(sig, what: str, values) -> list:
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"adc.jvp: {what} must be a list or tuple with one entry per parameter of {sig}, "
                        f"got {type(values).__name__}")
    if len(values) != len(sig.param_names):
        raise ValueError(f"adc.jvp: {what} has {len(values)} entries, but {sig} has "
                         f"{len(sig.param_names)} parameters")
    return list(values)


def _zeros_like(output: Tensor) -> Tensor:
    return constant(np.zeros(output.shape, output.dtype))


def _mode(transform: str, mode) -> str:
    if mode not in MODES:
        raise ValueError(f"adc.{transform}: mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}")
    return mode


def _one_parameter(transform: str, wrt) -> None:
    if isinstance(wrt, (list, tuple)):
        raise TypeError(f"adc.{transform}: wrt must be one parameter (an index or a name), got {wrt!r}")


def transformed(transform: str, kernel: Kernel, wrt, mode: str | None = None) -> Kernel:
    """The `transform` ("grad", "jacobian", "hessian", "hvp") of `kernel`, compiled once per
    (kernel, wrt, mode); pickled, the derivative is this call on its base kernel (which travels by
    value), so another process derives it again through its compile cache."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"adc.{transform}: expects a compiled adc kernel (e.g. module.f), got "
                        f"{type(kernel).__name__}")
    wanted = parameter_indices(transform, kernel, wrt)
    _check_result(transform, kernel, wanted)
    embedded_derivative(kernel)     # a --no-gradients module raises its LookupError
    derivation = DERIVATIONS[transform, mode]
    return kernel.derived.get(transform, (mode, wanted), lambda: _shippable(
        compiled(kernel, derivation, wanted), transform, kernel, wanted, mode)).kernel


def _shippable(derivative, transform: str, kernel: Kernel, wanted: tuple[int, ...], mode: str | None):
    """`derivative`, its kernel pickled as `transformed(transform, kernel, wanted, mode)`. It holds
    its base kernel weakly: the base kernel's cache (`derived`) holds it, and a strong reference back
    would make a cycle that only the garbage collector frees (with the native libraries it holds)."""
    if derivative.kernel is not None:
        derivative.kernel.recipe = functools.partial(_recipe, transform, weakref.ref(kernel), wanted, mode)
    return derivative


def _recipe(transform: str, kernel: weakref.ref, wanted: tuple[int, ...], mode: str | None) -> tuple:
    return transformed, (transform, kernel(), wanted, mode)


def parameter_indices(transform: str, kernel: Kernel, wrt) -> tuple[int, ...]:
    """`wrt` as parameter indices, each checked to name a float parameter (errors name `transform`)."""
    sig = kernel.signature
    if wrt is None:
        return tuple(i for i, t in enumerate(sig.param_types) if t.dtype.is_float)
    entries = list(wrt) if isinstance(wrt, (list, tuple)) else [wrt]
    if not entries:
        raise ValueError(f"adc.{transform}: wrt names no parameter of {sig.name}")
    wanted = []
    for entry in entries:
        if isinstance(entry, str) and entry in sig.param_names:
            i = sig.param_names.index(entry)
        elif isinstance(entry, int) and not isinstance(entry, bool) and -len(sig.param_names) <= entry < len(sig.param_names):
            i = entry % len(sig.param_names)
        else:
            raise ValueError(f"adc.{transform}: wrt={entry!r} is not a parameter of {sig} "
                             f"(give an index or one of {', '.join(sig.param_names)})")
        if not sig.param_types[i].dtype.is_float:
            raise TypeError(f"adc.{transform}: parameter '{sig.param_names[i]}' of {sig.name} is "
                            f"{sig.param_types[i]}; only float parameters have derivatives")
        if i in wanted:
            raise ValueError(f"adc.{transform}: parameter '{sig.param_names[i]}' is listed twice in wrt")
        wanted.append(i)
    return tuple(wanted)


def _check_result(transform: str, kernel: Kernel, wanted: tuple[int, ...]) -> None:
    sig = kernel.signature
    results = sig.result_types
    if len(results) != 1 or not results[0].dtype.is_float:
        raise ValueError(f"adc.{transform}: {sig.name} must return a single float tensor, it returns "
                         f"{', '.join(str(t) for t in results) or 'nothing'}")
    if transform in ("grad", "value_and_grad", "hessian", "hvp") and results[0].rank:
        raise ValueError(f"adc.{transform}: {sig.name} must return a scalar, it returns {results[0]}: "
                         f"reduce it, or use adc.jacobian")
    if transform == "batch_jacobian":
        if results[0].rank < 2:
            raise ValueError(f"adc.batch_jacobian: {sig.name} must return a tensor of rank >= 2 (examples "
                             f"on axis 0), it returns {results[0]}: use adc.jacobian")
        (i,) = wanted
        param = sig.param_types[i]
        if param.rank < 2 or param.shape[0] != results[0].shape[0]:
            raise ValueError(f"adc.batch_jacobian: parameter '{sig.param_names[i]}' ({param}) and the result "
                             f"({results[0]}) must share their leading (example) dimension, each with at "
                             f"least one more: use adc.jacobian")
