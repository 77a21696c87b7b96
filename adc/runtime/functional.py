"""adc.grad, adc.jacobian, adc.hessian: derivative kernels of a compiled kernel, no tape needed.

Each compiles one function that adc/passes/jacobian.py composes from the
kernel's IR (the module carries it) and returns it as an ordinary Kernel: it
checks its arguments, records on tapes, and can be transformed again.

    m = adc.compile("def loss(w: f64[N], x: f64[N]) -> f64:\\n    return sum(tanh(w * x))\\n")
    dloss = adc.grad(m.loss, wrt="w")      # loss_grad(w, x) -> f64[N]
    h = adc.hessian(m.loss)                # loss_hessian(w, x) -> f64[N,N]
    jx = adc.jacobian(dloss, wrt="x")      # d(dloss/dw)/dx -> f64[N,N]

`wrt` is a parameter index or name, or a sequence of them (default: every float
parameter); the derivative kernel returns one result per entry, zeros for a
parameter the result does not depend on. A kernel from a --no-gradients .so
refuses with its LookupError, as a tape would.
"""
from __future__ import annotations

import threading
import weakref

from adc.runtime.derivatives import compiled, embedded_derivative
from adc.runtime.kernel import Kernel

_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # Kernel -> {(transform, wrt): Kernel}
_lock = threading.Lock()
DERIVATIONS = {"grad": "gradient", "jacobian": "jacobian", "hessian": "hessian"}   # -> driver.DERIVATIONS


def grad(kernel: Kernel, wrt=None) -> Kernel:
    """The kernel (x...) -> (d result / d x_i for i in wrt) of a kernel with one scalar float result."""
    return _transformed("grad", kernel, wrt)


def jacobian(kernel: Kernel, wrt=None) -> Kernel:
    """The kernel (x...) -> (J_i for i in wrt), J_i of shape result.shape + x_i.shape, of a kernel
    with one float result."""
    return _transformed("jacobian", kernel, wrt)


def hessian(kernel: Kernel, wrt=0) -> Kernel:
    """The kernel (x...) -> d² result / d x², of shape x.shape + x.shape, for one parameter `wrt`
    of a kernel with one scalar float result."""
    if isinstance(wrt, (list, tuple)):
        raise TypeError(f"adc.hessian: wrt must be one parameter (an index or a name), got {wrt!r}")
    return _transformed("hessian", kernel, wrt)


def _transformed(transform: str, kernel: Kernel, wrt) -> Kernel:
    if not isinstance(kernel, Kernel):
        raise TypeError(f"adc.{transform}: expects a compiled adc kernel (e.g. module.f), got "
                        f"{type(kernel).__name__}")
    wanted = _wanted(transform, kernel, wrt)
    _check_result(transform, kernel)
    embedded_derivative(kernel)     # a --no-gradients module raises its LookupError
    key = (transform, wanted)
    with _lock:
        cache = _cache.setdefault(kernel, {})
        if key not in cache:
            cache[key] = _compile(transform, kernel, wanted)
        return cache[key]


def _compile(transform: str, kernel: Kernel, wanted: tuple[int, ...]) -> Kernel:
    return compiled(kernel, DERIVATIONS[transform], wanted).kernel


def _wanted(transform: str, kernel: Kernel, wrt) -> tuple[int, ...]:
    """`wrt` as parameter indices, each checked to name a float parameter."""
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


def _check_result(transform: str, kernel: Kernel) -> None:
    sig = kernel.signature
    results = sig.result_types
    if len(results) != 1 or not results[0].dtype.is_float:
        raise ValueError(f"adc.{transform}: {sig.name} must return a single float tensor, it returns "
                         f"{', '.join(str(t) for t in results) or 'nothing'}")
    if transform != "jacobian" and results[0].rank:
        raise ValueError(f"adc.{transform}: {sig.name} must return a scalar, it returns {results[0]}: "
                         f"reduce it, or use adc.jacobian")
