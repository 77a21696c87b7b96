"""adc.jax: adc kernels as JAX functions, under jit, grad, vjp, jvp and vmap, to any order.

    import adc, adc.jax
    m = adc.compile_file("samples/kernels.adc")
    f = adc.jax.function(m.logsumexp_rows)          # takes and returns JAX arrays
    jax.jit(f)(x); jax.grad(lambda x: f(x).sum())(x); jax.vmap(f)(xs); jax.jvp(f, (x,), (dx,))

A call is one JAX primitive, `adc_call`, whose parameters are the kernel and the arguments it is
linear in; each of its rules is a kernel adc compiles:

    jvp        the tangents of the results: the kernel's tangents-only JVP kernel on (x, dx),
               a call linear in dx; for a loss (one float scalar result), one call of its
               value-and-gradient kernel and sum(grad * dx) in JAX, which reverse mode
               transposes to ct * grad: a jitted training step makes one native call
    transpose  of a call linear in some arguments: the VJP kernel w.r.t. them, linear in the
               cotangents (so reverse mode is JAX's linearize-then-transpose over adc's kernels)
    batching   the batching pass's kernel (functional.batched): one call for the whole batch
    abstract   result shapes and dtypes from the signature's symbolic dimensions
    lowering   under jit, a custom call of XLA's FFI handler over the kernel's C ABI (adc/jax_ffi.py,
               no Python on the call path; an eager call runs that jitted call), or, on the
               "callback" route, `jax.pure_callback` running the kernel; either runs the kernel
               specialized to the call's static shapes (adc.specialize), compiled once per shape
               as XLA compiles its own code

A primitive rather than `jax.custom_vjp` (no forward mode at all) or `jax.custom_jvp` (its
reverse mode transposes the JVP rule's computation, which an opaque callback is not): with a JVP
and a transpose rule every composition works — the JVP of a JVP kernel, the transpose of a
JVP kernel's call (a VJP kernel), and so on, each compiled by adc on first use.
The handler reads and writes XLA's own buffers; the callback, NumPy views of them. An argument
of the wrong dtype, rank or device is a TypeError or ValueError naming the parameter.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from adc import jax_ffi
from adc.runtime.functional import batched, tangent_derivative, value_and_grad
from adc.runtime.kernel import Kernel
from adc.runtime.specialization import specialize

adc_call = Primitive("adc_call")
adc_call.multiple_results = True


ROUTES = ("ffi", "callback")


def function(kernel: Kernel, route: str | None = None) -> Callable:
    """The kernel as a JAX function (one per kernel and route): arrays in, a JAX array (or a
    tuple) out. `route` is how a jitted call reaches the kernel: "ffi" (XLA's FFI, the default
    where the handler builds) or "callback" (`jax.pure_callback`)."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"adc.jax.function: expects a compiled adc kernel (e.g. module.f), got "
                        f"{type(kernel).__name__}")
    if route is None:
        route = "ffi" if jax_ffi.lowering() is not None else "callback"
    elif route not in ROUTES:
        raise ValueError(f"adc.jax.function: route must be one of {ROUTES}, got {route!r}")
    elif route == "ffi" and jax_ffi.lowering() is None:
        raise RuntimeError("adc.jax.function: the XLA FFI handler (adc/jax_ffi.c) could not be built here; "
                           "route='callback' works without it")
    return kernel.derived.get("jax_function", route, lambda: _function(kernel, route))


def _function(kernel: Kernel, route: str) -> Callable:
    sig = kernel.signature

    @functools.wraps(kernel)
    def call(*args, **kwargs):
        if kwargs or len(args) != len(sig.param_names):
            args = kernel.__signature__.bind(*args, **kwargs).args
        outs = adc_call.bind(*(_checked(kernel, i, a) for i, a in enumerate(args)), kernel=kernel, linear=(),
                             route=route)
        return outs[0] if len(outs) == 1 else tuple(outs)

    return call


def _checked(kernel: Kernel, i: int, value: Any):
    """The argument for parameter i as a JAX value of its dtype and rank, or the error naming it."""
    sig = kernel.signature
    ptype, where = sig.param_types[i], f"{sig.name}: parameter '{sig.param_names[i]}'"
    want = ptype.dtype.numpy
    if isinstance(value, (bool, int, float)):
        value = np.asarray(value, dtype=want)
    if not hasattr(value, "dtype") or not hasattr(value, "shape"):
        raise TypeError(f"{where} expects an array of type {ptype}, got {type(value).__name__}")
    held = jax.dtypes.canonicalize_dtype(value.dtype)     # what JAX makes of it: int64 -> int32 without x64
    if held != want:
        hint = (f", which JAX holds as {held} unless jax.config.update('jax_enable_x64', True)" if held != value.dtype
                else f"; convert it with .astype(np.{want})")
        raise TypeError(f"{where} expects dtype {ptype.dtype} ({want}), got {value.dtype}{hint}")
    if len(value.shape) != ptype.rank:
        raise ValueError(f"{where} expects rank {ptype.rank} ({ptype}), got an array of shape {tuple(value.shape)}")
    if isinstance(value, jax.Array) and not isinstance(value, jax.core.Tracer) and \
            any(d.platform != "cpu" for d in value.devices()):
        raise ValueError(f"{where} expects an array on the CPU, got one on {value.devices()}; "
                         f"move it with jax.device_put(x, jax.devices('cpu')[0])")
    return value


def _run(kernel: Kernel, *args) -> list[np.ndarray]:
    """The native call on NumPy views of the arguments (no copy of a CPU buffer)."""
    results = kernel(*(np.asarray(a) for a in args))
    return [r.numpy() for r in (results if type(results) is tuple else (results,))]


def _impl(*args, kernel: Kernel, linear: tuple, route: str):
    """An eager call: on the FFI route the call alone, jitted once (as JAX runs its own primitives),
    which costs less than handing the kernel NumPy views and JAX its results."""
    if route == "ffi":
        return kernel.derived.get("jax_eager", linear, lambda: jax.jit(functools.partial(
            adc_call.bind, kernel=kernel, linear=linear, route=route)))(*args)
    return [jnp.asarray(r) for r in _run(kernel, *args)]


def _abstract(*avals, kernel: Kernel, linear: tuple, route: str):
    return _result_avals(kernel, avals)


def _result_avals(kernel: Kernel, avals) -> list:
    """Result shapes and dtypes for arguments of these shapes (errors name the parameter)."""
    env = kernel.bind_shapes([a.shape for a in avals])
    return [jax.core.ShapedArray(tuple(d if isinstance(d, int) else d.evaluate(env) for d in t.shape),
                                 t.dtype.numpy) for t in kernel.signature.result_types]


def _lower(ctx, *args, kernel: Kernel, linear: tuple, route: str):
    """Under jit: a custom call of XLA's FFI handler (adc/jax_ffi.py), or a pure_callback (also when
    JAX's persistent compilation cache is on: an executable holding a kernel's address must not
    outlive the process). Either runs the kernel specialized to the call's shapes, which jit fixes."""
    kernel = _static(kernel, [a.shape for a in ctx.avals_in])
    if route == "ffi" and not jax_ffi.executables_persist():
        return jax_ffi.lowering()(ctx, *args, kernel=kernel)
    return mlir.lower_fun(functools.partial(_callback, kernel), multiple_results=True)(ctx, *args)


def _static(kernel: Kernel, shapes) -> Kernel:
    """The kernel compiled for these shapes (adc.specialize: constant trip counts), or the kernel
    itself where no compiler can (a module loaded from a shared object without its IR)."""
    try:
        return specialize(kernel, **kernel.bind_shapes(shapes))
    except LookupError:
        return kernel


def _callback(kernel: Kernel, *args):
    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in _result_avals(kernel, [a.aval for a in args])]
    return jax.pure_callback(functools.partial(_run, kernel), shapes, *args)


def _jvp(primals, tangents, *, kernel: Kernel, linear: tuple, route: str):
    """d f(x)[dx] = f_jvp(x, dx): the tangents-only JVP kernel w.r.t. the arguments that move;
    for a loss (one float scalar result), <grad f(x), dx> from one value-and-gradient call."""
    moving = tuple(i for i, t in enumerate(tangents) if type(t) is not ad.Zero)
    floats = tuple(i for i in moving if kernel.signature.param_types[i].dtype.is_float)
    if floats and not linear and _is_loss(kernel):
        return _loss_jvp(primals, tangents, floats, kernel, route)
    outs = adc_call.bind(*primals, kernel=kernel, linear=linear, route=route)
    result_avals = [jax.typeof(o).to_tangent_aval() for o in outs]
    derivative = tangent_derivative(kernel, moving) if moving else None
    if derivative is None or not derivative.wrt:
        return outs, [ad.Zero(a) for a in result_avals]
    if derivative.needs_call:
        n = len(primals)
        moved = adc_call.bind(*primals, *(tangents[i] for i in derivative.wrt), kernel=derivative.kernel,
                              linear=tuple(range(n, n + len(derivative.wrt))), route=route)
    else:
        moved = [tangents[derivative.wrt[p]] for p in derivative.passthrough]
    moved = iter(moved)
    return outs, [next(moved) if t.dtype.is_float else ad.Zero(a)
                  for t, a in zip(kernel.signature.result_types, result_avals)]


def _is_loss(kernel: Kernel) -> bool:
    (result, *others) = kernel.signature.result_types
    return not others and result.rank == 0 and result.dtype.is_float


def _loss_jvp(primals, tangents, moving: tuple, kernel: Kernel, route: str):
    """A loss's value and its gradients in one call (adc.value_and_grad's kernel), the tangent
    sum(grad * dx) a JAX expression linear in dx: reverse mode transposes it to ct * grad, so a
    jitted value_and_grad makes one native call, no VJP call after it."""
    value, *grads = adc_call.bind(*primals, kernel=value_and_grad(kernel, moving), linear=(), route=route)
    dtype = kernel.signature.result_types[0].dtype.numpy
    tangent = functools.reduce(jnp.add, [jnp.sum(g * tangents[i]).astype(dtype) for i, g in zip(moving, grads)])
    return [value], [tangent]


def _transpose(cts, *args, kernel: Kernel, linear: tuple, route: str):
    """Of a call linear in its undefined arguments: the VJP kernel w.r.t. them, which reads no
    value of theirs (zeros stand in), on the cotangents — a call linear in those."""
    undefined = tuple(i for i, a in enumerate(args) if ad.is_undefined_primal(a))
    assert set(undefined) <= set(linear), "adc_call transposed in an argument it is not linear in"
    filled = [jnp.zeros(a.aval.shape, a.aval.dtype) if ad.is_undefined_primal(a) else a for a in args]
    avals = [a.aval if ad.is_undefined_primal(a) else jax.typeof(a) for a in args]
    cts = [ct if type(ct) is not ad.Zero and t.dtype.is_float else jnp.zeros(r.shape, r.dtype)   # (ints': float0)
           for ct, r, t in zip(cts, _result_avals(kernel, avals), kernel.signature.result_types)]
    derivative = kernel.derivative(undefined)
    if derivative.needs_call:
        n = len(args)
        outgoing = adc_call.bind(*filled, *cts, kernel=derivative.kernel, linear=tuple(range(n, n + len(cts))),
                                 route=route)
    else:
        outgoing = [cts[p] for p in derivative.passthrough]
    grads = dict(zip(derivative.wrt, outgoing))
    return [(grads[i] if i in grads else ad.Zero(a.aval)) if i in undefined else None for i, a in enumerate(args)]


def _batch(args, dims, *, kernel: Kernel, linear: tuple, route: str):
    """vmap: the batching pass's kernel over the batched arguments, their batch axes moved first."""
    moved = tuple(i for i, d in enumerate(dims) if d is not None)
    args = [a if d is None else jnp.moveaxis(a, d, 0) for a, d in zip(args, dims)]
    outs = adc_call.bind(*args, kernel=batched(kernel, moved), linear=linear, route=route)
    return outs, [0] * len(outs)


adc_call.def_impl(_impl)
adc_call.def_abstract_eval(_abstract)
mlir.register_lowering(adc_call, _lower)
ad.primitive_jvps[adc_call] = _jvp
ad.primitive_transposes[adc_call] = _transpose
batching.primitive_batchers[adc_call] = _batch
