"""DerivativeCache: what the runtime builds once from a compiled kernel, kept by the kernel.

A derivative costs a compilation (or an IR analysis), so each is built on first
request and kept for the life of what it was built from. Every Kernel holds one
cache (`kernel.derived`), and so does each loaded module's GradientSource (its IR,
parsed once for the analyses); nothing else in the runtime keeps derivatives. A
cache dies with its holder: no side table keyed on kernels, no weak references.

Entries are named by a kind and a request, the kind saying which builder made it:

    "vjp", wanted            the kernel's VJP (Kernel.derivative; derivatives.derive)
    "split_vjp", wanted      its VJP cut in two, for a lone tape (derivatives.split)
    "vjp_batched", wanted    its VJP over a seed axis; "jvp_batched" the tangents' (derivatives.py)
    "sparsity", (wrt, key)   its Jacobian patterns for some sizes and integer arguments;
    "sparse_plan", (wrt, mode, symmetric, key)   a pattern's coloring, seeds and decompression
                             (sparse_derivatives.py)
    "example_axes", (param, axis)   where a param's examples go (jacobians.py)
    "jvp" / "jvp_tangents", wanted  its JVP, with and without the primal results (functional.py)
    "torch_op" / "jax_function", None   the kernel as a PyTorch operator / JAX function (adc/torch.py, adc/jax.py)
    "grad", "jacobian"..., (mode, wanted)   a transformed kernel (functional.transformed)
    "vmap", (in_axes, out_axes)   the kernel mapped over a batch (functional.vmap)
    "specialize", sizes      the kernel compiled for some sizes, (symbol, size) pairs (specialization.py)
    "parsed_ir", None        a module's IR, parsed (GradientSource.parsed_ir)

    kernel.derived.get("vjp", (0,), derivatives.derive, kernel, (0,))
    kernel.derived.find(("split_vjp", (0,)), UNBUILT)    # the entry, or UNBUILT: never builds
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, TypeVar

from adc import locks

T = TypeVar("T")

# One lock for every build: builds compile, and the driver compiles one derivation at a time anyway.
# Reentrant: a build may ask for another entry.
_lock = locks.lock(reentrant=True)

UNBUILT = object()  # what `find` returns for an entry not built yet (an entry may be None)


class DerivativeCache:
    """The entries built from one kernel (or module), by (kind, request); see the module docstring."""

    __slots__ = ("_built", "find")

    def __init__(self):
        self._built: dict[tuple[str, Hashable], object] = {}
        # find((kind, request), UNBUILT): the entry if built, else UNBUILT; the dict's own get, for
        # the one hot path that asks on every call (a kernel call under a tape, for its split VJP),
        # where `get`'s Python call would cost three times the lookup
        self.find = self._built.get

    def get(self, kind: str, request: Hashable, build: Callable[..., T], *arguments: Any) -> T:
        """The entry (kind, request), made by `build(*arguments)` on its first request: once,
        whatever the threads asking (a build's exception propagates, and the next request builds
        again). The arguments rather than a closure over them: a caller needs no function made
        for a build that has happened."""
        key = (kind, request)
        try:
            return self._built[key]
        except KeyError:
            with _lock:
                if key not in self._built:
                    self._built[key] = build(*arguments)
                return self._built[key]
