"""Sparse Jacobians and Hessians of a compiled kernel: its pattern detected from its IR, colored,
the seeds pushed through one batched JVP (or pulled through one batched VJP), decompressed.

    jac = adc.jacobian(m.residual, wrt="x", sparse=True)
    J = jac(x, p)                   # scipy.sparse CSR (result size × x size); (data, indices, indptr) without SciPy
    jac.sparsity, jac.colors        # the pattern of the last call's sizes, and its seeds
    jac.values(x, p, out=vals)      # the nonzeros in the pattern's order, into a preallocated array
    h = adc.hessian(m.loss, wrt="x", sparse=True)     # star-colored, compressed Hessian-vector products

A shared object compiled with `adc compile --sparse-jacobian residual:x` holds the whole of it at
fixed sizes, and `adc.jacobian(m.residual, wrt="x", sparse=True)` of the loaded module is then a
`CompiledSparseJacobian`: the same API, its matrices in CSC order, one native call per evaluation,
no compiler needed.

The pattern (adc/passes/sparsity) is built for the sizes of the first call and the values of its
integer arguments, and kept in the kernel's cache (`kernel.derived`) under their shapes and
those values (`argument_key`): a call with other sizes or other integer values builds its own,
never a stale one; and in the on-disk compile cache (`driver.cached_analysis`, namespace
`sparsity`), under the module's IR text and a digest of that key, so another process reads it
instead of detecting it. The plan (coloring, seeds, decompression) is kept under the same key,
so a call after the first finds it in one lookup (an optimizer's inner loop). Per pattern: a
column coloring and a row coloring; forward mode (one batched JVP of the kernel,
adc/runtime/derivatives.py `batched_tangents`) when the columns need no more colors than the
rows, else reverse (`batched_derivative`); `mode` forces one. In mode "auto", a Jacobian of a few
index-mapped diagonals (a stencil) is computed where its nonzeros lie instead, when it needs no
more diagonals than the coloring needs seeds (`direct`, passes/sparsity/nonzeros.py): one kernel
computing the diagonals' weights, one gather. A Hessian is the Jacobian of the gradient kernel,
its pattern symmetrized and star-colored, read by symmetric decompression.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np

from adc.ir.types import evaluate_dim
from adc.passes.sparsity import Pattern, jacobian_patterns
from adc.passes.sparsity.bicoloring import bicolor
from adc.passes.sparsity.compression import compress, seeds
from adc.passes.sparsity.patterns import decode, encode, union
from adc.runtime.derivatives import (CompiledSparse, batched_derivative, batched_tangents, compiled,
                                     embedded_derivative)
from adc.runtime.tensor import Tensor

_NO_SIZES: list = []    # the dimension sizes of a kernel specialized to a call's: none (never written)

try:    # built by setup.py where there is a C compiler; without it Hessians take the star coloring
    from adc.runtime import native_substitution
except ImportError:
    native_substitution = None


def argument_key(kernel, args) -> tuple:
    """What a pattern of `kernel` depends on in a call's `args`: their shapes and the bytes of the
    integer ones (float values are never read). Cheap (no hashing, no array made of a number):
    an optimizer makes it at every call."""
    if not kernel.integer_params:
        return tuple(map(_shape, args)), ()
    integers = tuple(np.ascontiguousarray(args[k], dtype).tobytes() for k, dtype in kernel.integer_params)
    return tuple(map(_shape, args)), integers


def _shape(value) -> tuple:
    shape = getattr(value, "shape", None)
    if shape is not None:
        return tuple(shape)
    return () if isinstance(value, (int, float)) else np.shape(value)


def kernel_patterns(kernel, args, wrt: int, key: tuple | None = None) -> tuple[Pattern, ...]:
    """Per result of `kernel`, its pattern in parameter `wrt` at the sizes and integer values of
    `args` (whose `argument_key` is `key`), built once per (wrt, key): in this process (the
    kernel's cache), and on disk (the compile cache, see `_detected`)."""
    key = key or argument_key(kernel, args)
    return kernel.derived.get("sparsity", (wrt, key),
                              lambda: _detected(kernel, [np.asarray(a) for a in args], wrt, key))


def _detected(kernel, arrays, wrt: int, key: tuple) -> tuple[Pattern, ...]:
    """The analysis's patterns, kept in the on-disk compile cache under the module's IR text, the
    kernel, wrt and a digest of the arguments' key, so another process reads them instead of
    parsing the IR and walking it (without the driver's dependencies: detected here, every time)."""
    source, name = kernel.gradient_source, kernel.signature.name

    def detect() -> tuple[Pattern, ...]:
        return jacobian_patterns(source.parsed_ir(), name, arrays, wrt)
    try:
        from adc import driver      # the compile cache; optional for a deployment loading .so files
    except ImportError:
        return detect()
    shapes, integers = key
    digest = hashlib.sha256(repr(shapes).encode())
    for values in integers:
        digest.update(values)
    parts = (source.info.name, source.info.ir, name, str(wrt), digest.hexdigest())
    return decode(driver.cached_analysis("sparsity", f"{source.info.name}: sparsity of {name}", parts,
                                         lambda: encode(detect())))


def as_matrix(pattern: Pattern, data: np.ndarray | None = None):
    """A scipy.sparse CSR matrix of the pattern (booleans, or `data`); without SciPy, the pattern's
    (indptr, indices, shape), or the values' (data, indices, indptr)."""
    try:
        from scipy import sparse     # optional: the `sparse` extra
    except ImportError:
        if data is None:
            return pattern.indptr, pattern.indices, (pattern.rows, pattern.columns)
        return data, pattern.indices, pattern.indptr
    values = np.ones(pattern.nnz, bool) if data is None else data
    return sparse.csr_matrix((values, pattern.indices, pattern.indptr), shape=(pattern.rows, pattern.columns))


@dataclass(frozen=True)
class Direct:
    """A Jacobian whose nonzeros a kernel computes where they lie (passes/sparsity/nonzeros.py),
    of `terms` diagonals. With a `layout` (nonzeros.py `RowLayout`: rows of one length), `kernel`
    takes the call's arguments and the layout's source table and writes the nonzeros themselves,
    in the pattern's order, into the caller's array; else it returns the diagonals' weights, flat
    (a constant diagonal as one number), and `sources` says where each nonzero is among them
    (nonzeros.py `Sources`)."""

    kernel: object
    terms: int
    dtype: np.dtype
    layout: object | None = None
    sources: object | None = None


@dataclass(frozen=True)
class Plan:
    """What one pattern costs to fill: the seeds (as a Tensor [colors, ...]), whether they go
    forward, and where each nonzero lies in the flat compressed products (or, an acyclically
    colored Hessian, the `substitution` recovering them, prepared for adc/runtime/native_substitution.c);
    a bidirectional plan has `reverse_seeds` too, and its index reads the forward products then
    the reverse ones. A `direct` plan computes the nonzeros instead, the seeds left unused."""

    pattern: Pattern
    colors: int
    forward: bool
    seeds: Tensor
    index: np.ndarray | None
    reverse_seeds: Tensor | None = None
    substitution: object | None = None
    direct: Direct | None = None

    @property
    def route(self) -> str:
        if self.direct is not None:
            return "direct"
        if self.reverse_seeds is not None:
            return "bidirectional"
        return "forward" if self.forward else "reverse"


def plan(pattern: Pattern, mode: str, symmetric: bool, wrt, result, bidirectional: bool = False) -> Plan:
    """The coloring of `pattern` for `mode` ("auto", "forward", "reverse"; a symmetric pattern
    is colored acyclically when that takes fewer seeds than star and the substitution's native
    loop is built, else star; forward), and its seeds and decompression; `wrt` and `result` are
    the (shape, dtype) of the values the seeds stand for, forward and reverse. `bidirectional`:
    in mode "auto", JVPs and VJPs together when that takes fewer seeds (bicoloring.py)."""
    chosen = compress(pattern, mode, symmetric, substitute=native_substitution is not None)
    both = bicolor(pattern) if bidirectional and mode == "auto" and not symmetric else None
    if both is not None and both.count < chosen.count:
        return Plan(pattern, both.count, True, _seed_tensor(both.columns, *wrt), both.index,
                    _seed_tensor(both.rows, *result))
    the_seeds = _seed_tensor(chosen.colors, *(wrt if chosen.forward else result))
    recovered = chosen.substitution
    if recovered is not None:
        recovered = native_substitution.prepare(recovered.gather, recovered.parent, recovered.first,
                                                recovered.second, the_seeds.size, pattern.nnz)
    return Plan(pattern, chosen.count, chosen.forward, the_seeds, chosen.index, substitution=recovered)


def _seed_tensor(colors: np.ndarray, shape: tuple, dtype) -> Tensor:
    the_seeds = seeds(colors, dtype)
    return Tensor._wrap(the_seeds.reshape((len(the_seeds), *shape)))


def decompressed(the_plan: Plan, compressed, out: np.ndarray | None = None) -> np.ndarray:
    """The nonzeros of the plan's pattern gathered from the products of its seeds (None: no path
    from the seeded value, an empty pattern), into `out` when given."""
    flat = np.zeros(0) if compressed is None else np.ascontiguousarray(compressed).reshape(-1)
    recovered = the_plan.substitution
    if out is None:
        if recovered is None:
            return flat[the_plan.index]
        out = np.empty(the_plan.pattern.nnz, flat.dtype)
    else:
        _check_out(out, the_plan.pattern.nnz, flat.dtype)
    if recovered is not None:
        native_substitution.substitute(recovered, flat, out)
        return out
    # the index is in range by construction; mode "raise" with `out` gathers into a temporary first
    # and checks each index (4x the time of "wrap", which never reads outside `flat` either)
    return flat.take(the_plan.index, out=out, mode="wrap")


def direct_values(the_plan: Plan, args, out: np.ndarray | None = None) -> np.ndarray:
    """The nonzeros of a direct plan's pattern for the call's `args`, into `out` when given."""
    direct, nnz = the_plan.direct, the_plan.pattern.nnz
    if direct.layout is None:
        weights = direct.kernel(*args).numpy().reshape(-1)
        if out is None:
            out = np.empty(nnz, weights.dtype)
        else:
            _check_out(out, nnz, weights.dtype)
        return direct.sources.gather(weights, out)
    kernel = direct.kernel
    if out is None:
        out = np.empty(nnz, direct.dtype)
    else:
        _check_out(out, nnz, direct.dtype)
        if not (out.flags.c_contiguous and out.flags.writeable):       # (a strided view, say)
            out[...] = direct_values(the_plan, args)
            return out
    arrays = kernel.arrays_of((*args, direct.layout.source))
    # specialized to the plan's sizes, it has no symbol left to bind
    sizes = kernel.dims_of([a.shape for a in arrays]) if kernel.signature.dims else _NO_SIZES
    kernel.run_into(sizes, [*arrays, out])
    return out


def _check_out(out: np.ndarray, nnz: int, dtype: np.dtype) -> None:
    if out.shape != (nnz,) or out.dtype != dtype:
        raise ValueError(f"values: out must be a {dtype} array of shape {(nnz,)}, got {out.dtype} {out.shape}")


def direct(kernel, wrt: int, pattern: Pattern, sizes: dict[str, int]) -> Direct | None:
    """The kernel computing the nonzeros of `pattern` (the Jacobian of `kernel`'s result w.r.t.
    param `wrt` at these sizes of its symbols) where they lie; None where that Jacobian is not a few
    index-mapped diagonals (loops, sums, products: the coloring serves it) or no compiler is there."""
    # the pass needs the compiler's passes, which a deployment loading .so files may not import
    from adc.passes.sparsity.nonzeros import NotDirect, gather_sources, result_diagonals, row_layout

    bound = tuple((s, sizes[s]) for s in kernel.signature.dims)
    try:
        embedded_derivative(kernel)     # a --no-gradients module raises its LookupError (the coloring's too)
        diagonals = result_diagonals(kernel.gradient_source.parsed_ir(), kernel.signature.name, wrt, dict(bound))
        layout = row_layout(diagonals, pattern)
        sources = gather_sources(diagonals, pattern) if layout is None else None
        rows = None if layout is None else (layout.width, layout.sources)
        made = compiled(kernel, "nonzeros", (wrt, bound, rows))
    except (NotDirect, LookupError):
        return None
    dtype = kernel.signature.result_types[0].dtype.numpy
    return Direct(made.kernel, len(diagonals.columns), dtype, layout, sources)


class SparseJacobian:
    """The sparse Jacobian of a kernel's one float result w.r.t. its float parameter `wrt` (or,
    `symmetric`, the Hessian of the kernel whose gradient kernel `kernel` is): call it like the
    kernel. See the module docstring."""

    def __init__(self, kernel, wrt: int, mode: str = "auto", symmetric: bool = False):
        self.kernel, self.wrt, self.mode, self.symmetric = kernel, wrt, mode, symmetric
        self._last: tuple[tuple, Plan] | None = None     # the last call's argument_key and plan

    def __call__(self, *args):
        the_plan = self._plan(args)
        return as_matrix(the_plan.pattern, self._filled(the_plan, args))

    def values(self, *args, out: np.ndarray | None = None) -> np.ndarray:
        """The nonzeros in the pattern's (CSR) order, written into `out` when given (of the
        pattern's number of nonzeros and the result's dtype)."""
        return self._filled(self._plan(args), args, out)

    def _filled(self, the_plan: Plan, args, out: np.ndarray | None = None) -> np.ndarray:
        if the_plan.direct is not None:
            return direct_values(the_plan, args, out)
        return decompressed(the_plan, self._compressed(the_plan, args), out)

    @property
    def sparsity(self):
        """The pattern of the last call (scipy.sparse boolean CSR, or (indptr, indices, shape))."""
        return as_matrix(self._called().pattern)

    @property
    def colors(self) -> int:
        """The seeds the coloring of the last call's pattern pushes (or pulls): its number of colors."""
        return self._called().colors

    @property
    def route(self) -> str:
        """How the last call filled its nonzeros: "direct" (computed where they lie), or the seeds
        of the coloring pushed "forward", pulled in "reverse", or both ("bidirectional")."""
        return self._called().route

    def _called(self) -> Plan:
        if self._last is None:
            raise ValueError(f"the sparse derivative of {self.kernel.signature.name} has no pattern yet: the "
                             f"pattern is built for the sizes of its first call; call it first")
        return self._last[1]

    def _plan(self, args) -> Plan:
        """The plan of the call's sizes and integer values: the last call's when they are the same
        (an optimizer's inner loop), else one cache lookup once it is built."""
        key = argument_key(self.kernel, args)
        last = self._last       # (key, plan), replaced whole: a thread never pairs a key with another's plan
        if last is not None and last[0] == key:
            return last[1]
        the_plan = self.kernel.derived.get("sparse_plan", (self.wrt, self.mode, self.symmetric, key),
                                           lambda: self._planned(args, key))
        self._last = key, the_plan
        return the_plan

    def _planned(self, args, key: tuple) -> Plan:
        sig = self.kernel.signature
        env = self.kernel.bind_shapes([np.shape(a) for a in args])
        result_shape = tuple(evaluate_dim(d, env) for d in sig.result_types[0].shape)
        (pattern,) = kernel_patterns(self.kernel, args, self.wrt, key)
        if self.symmetric:
            pattern = union([pattern, pattern.transpose()])
        wrt = (np.shape(args[self.wrt]), sig.param_types[self.wrt].dtype.numpy)
        colored = plan(pattern, self.mode, self.symmetric, wrt, (result_shape, sig.result_types[0].dtype.numpy),
                       bidirectional=True)
        if self.symmetric or self.mode != "auto" or not pattern.nnz:
            return colored
        computed = direct(self.kernel, self.wrt, pattern, env)
        if computed is None or computed.terms > colored.colors:
            return colored
        return replace(colored, direct=computed)

    def _compressed(self, the_plan: Plan, args):
        """The products of the plan's seeds: [colors, *result] forward, [colors, *x] reverse;
        a bidirectional plan's, both flattened one after the other."""
        if the_plan.reverse_seeds is None:
            return self._products(the_plan.forward, the_plan.seeds, args)
        parts = [self._products(True, the_plan.seeds, args), self._products(False, the_plan.reverse_seeds, args)]
        return np.concatenate([np.zeros(s.size, s.dtype) if p is None else np.ravel(p)
                               for p, s in zip(parts, (the_plan.seeds, the_plan.reverse_seeds))])

    def _products(self, forward: bool, the_seeds: Tensor, args):
        derivative = (batched_tangents if forward else batched_derivative)(self.kernel, (self.wrt,))
        if not derivative.wrt:      # no path from wrt to the result: an empty pattern, nothing to fill
            return None
        if not derivative.needs_call:       # the result is wrt (or its cotangent the result's)
            return the_seeds
        out = derivative.kernel(*args, the_seeds)
        return out[0] if type(out) is tuple else out


def compiled_sparse(kernel, wrt: int, hessian: bool, mode: str = "auto") -> "CompiledSparseJacobian | None":
    """The sparse Jacobian (`hessian`: Hessian) of `kernel` w.r.t. param `wrt` its shared object
    holds, when it does and in the `mode` asked ("auto": either)."""
    found = kernel.gradient_source.sparse.get((kernel.signature.name, wrt, hessian))
    if found is None or mode == ("reverse" if found.entry.forward else "forward"):
        return None
    return CompiledSparseJacobian(found)


class CompiledSparseJacobian:
    """A sparse Jacobian or Hessian compiled into a shared object (`adc compile --sparse-jacobian`,
    `--sparse-hessian`): SparseJacobian's API, its matrices in CSC order (scipy.sparse.csc_matrix;
    without SciPy, (data, indices, indptr) of the CSC form and the pattern's (indptr, indices,
    shape)), its values in CSC order, one call of its native kernel."""

    def __init__(self, compiled: CompiledSparse):
        self.compiled = compiled
        self._by_columns = Pattern(compiled.colptr, compiled.rowind, compiled.entry.shape[0])

    def __call__(self, *args):
        return self._csc(self.values(*args))

    def values(self, *args, out: np.ndarray | None = None) -> np.ndarray:
        """The nonzeros in CSC order, written into `out` when given."""
        values = np.asarray(self.compiled.kernel(*args))
        if out is None:
            return values
        if out.shape != values.shape or out.dtype != values.dtype:
            raise ValueError(f"values: out must be a {values.dtype} array of shape {values.shape}, got "
                             f"{out.dtype} {out.shape}")
        np.copyto(out, values)
        return out

    @property
    def sparsity(self):
        """The pattern (scipy.sparse boolean CSC, or (indptr, indices, shape) of the CSC form)."""
        return self._csc(None)

    @property
    def colors(self) -> int:
        return self.compiled.entry.colors

    def _csc(self, data):
        """The matrix whose transpose's CSR form is the pattern's CSC form."""
        matrix = as_matrix(self._by_columns, data)
        if type(matrix) is not tuple:
            return matrix.T
        return matrix if data is not None else (*matrix[:2], self.compiled.entry.shape)
