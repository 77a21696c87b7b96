"""The `interop` benchmark: the per-call cost of an adc kernel called from PyTorch (adc.torch) and
from JAX (adc.jax), on a scalar kernel (all overhead) and a 1M-element one, against what each
framework's own empty call costs: an empty torch.library.custom_op; an empty jax.pure_callback
under jit and a jitted no-op. adc.jax is timed on both its routes under jit: XLA's FFI (the
default) and pure_callback. Targets (issue 39): adc's PyTorch op at most the empty custom_op
+ 5 us; adc's JAX route under jit at most the empty pure_callback + 5 us."""
from __future__ import annotations

import numpy as np

import adc
from timing import optional, report, timed

SOURCE = """def scale(x: f32) -> f32:
    return 2.0 * x

def shift(x: f32[N]) -> f32[N]:
    return x + 1.0
"""
SIZES = {"scale": (), "shift": (1_000_000,)}


def bench_interop() -> None:
    m = adc.compile(SOURCE, "interop.adc")
    torch, jax = optional("torch"), optional("jax")
    empty = torch and torch.library.custom_op("adc_bench::empty", lambda t: torch.empty_like(t), mutates_args=(),
                                              schema="(Tensor t) -> Tensor")
    for name, shape in SIZES.items():
        x = np.ones(shape, np.float32)
        kernel = getattr(m, name)
        routes = {"kernel on NumPy": timed(lambda: kernel(x))}
        others = {}
        if torch:
            routes |= _torch_routes(torch, empty, kernel, x, others)
        if jax:
            routes |= _jax_routes(jax, kernel, x, others)
        report(f"interop: {kernel.signature}, {x.size:,} f32 element(s)", routes, others,
               "adc.torch op <= empty custom_op + 5 us; adc.jax under jit <= empty pure_callback + 5 us")


def _torch_routes(torch, empty, kernel, x: np.ndarray, others: dict) -> dict:
    import adc.torch

    t = torch.from_numpy(x)
    op = adc.torch.op(kernel)
    others["torch empty custom_op"] = timed(lambda: empty(t))
    return {"adc.torch op": timed(lambda: op(t))}


def _jax_routes(jax, kernel, x: np.ndarray, others: dict) -> dict:
    import adc.jax

    a = jax.numpy.asarray(x)
    shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
    empty_callback = jax.jit(lambda v: jax.pure_callback(lambda u: np.empty(u.shape, u.dtype), shape, v))
    noop = jax.jit(lambda v: v)
    f = adc.jax.function(kernel)
    jitted = {route: jax.jit(adc.jax.function(kernel, route)) for route in adc.jax.ROUTES}
    others["jax empty pure_callback (jit)"] = timed(lambda: empty_callback(a).block_until_ready())
    others["jax jitted no-op"] = timed(lambda: noop(a).block_until_ready())
    return {"adc.jax eager": timed(lambda: f(a).block_until_ready()),
            **{f"adc.jax jit, {route}": timed(lambda: call(a).block_until_ready()) for route, call in jitted.items()}}
