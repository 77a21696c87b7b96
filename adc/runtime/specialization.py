"""adc.specialize: a kernel compiled for fixed sizes of some of its dimension symbols.

    fixed = adc.specialize(m.cross_entropy, C=5)      # cross_entropy_C5(logits: f32[B,5], labels: i64[B])

Its loops have constant trip counts, which LLVM unrolls when short and vectorizes without
remainders: what JAX's static shapes give XLA, for a caller whose sizes stay (adc.jax under `jit`,
whose shapes are static: the softmax cross-entropy's value and gradient over [600, 5] takes 2.4 µs
specialized, 6.4 symbolic; a kernel of fixed sizes is also compiled with LLVM's loop unrolling,
compiler.lowered_kernel). The kernel comes from passes/specialize.py, derived from the IR its
module carries like any derivative (compiled on its first call, cached on disk), and is an
ordinary Kernel.
"""
from __future__ import annotations

import numpy as np

from adc.runtime.derivatives import compiled, shippable
from adc.runtime.kernel import Kernel, as_kernel


def specialize(kernel: Kernel, **sizes: int) -> Kernel:
    """The kernel compiled for these sizes of its dimension symbols; the symbols left out stay
    symbolic. It takes arguments of those sizes only (a ValueError names the parameter
    otherwise), and differentiates, records on tapes, pickles and transforms like the kernel.
    Compiled once per (kernel, sizes); no sizes: the kernel itself."""
    kernel = as_kernel(kernel, "adc.specialize")
    symbols = kernel.signature.dims
    for symbol, size in sizes.items():
        if symbol not in symbols:
            raise ValueError(f"adc.specialize: {kernel.signature.name} has no dimension symbol {symbol!r}; "
                             f"its parameters' are {', '.join(symbols) or 'none'}")
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ValueError(f"adc.specialize: the size of {symbol} must be a non-negative int, got {size!r}")
    bound = tuple((s, int(sizes[s])) for s in symbols if s in sizes)
    if not bound:
        return kernel
    return kernel.derived.get("specialize", bound, lambda: shippable(
        compiled(kernel, "specialize", bound), _specialized_again, kernel, bound)).kernel


def _specialized_again(kernel: Kernel, bound: tuple) -> Kernel:
    return specialize(kernel, **dict(bound))
