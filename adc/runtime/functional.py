"""adc.grad, adc.jacobian, adc.jacfwd, adc.hessian, adc.hvp and adc.jvp: derivatives of a
compiled kernel, no tape needed; and adc.vmap, the kernel mapped over a batch.

Each compiles one function that adc/passes/jacobian.py (or the JVP pass) composes
from the kernel's IR (the module carries it) and returns it as an ordinary Kernel:
it checks its arguments, records on tapes, and can be transformed again.

    m = adc.compile("def loss(w: f64[N], x: f64[N]) -> f64:\\n    return sum(tanh(w * x))\\n")
    dloss = adc.grad(m.loss, wrt="w")      # loss_grad(w, x) -> f64[N]
    h = adc.hessian(m.loss)                # loss_hessian(w, x) -> f64[N,N], forward-over-reverse
    jx = adc.jacobian(dloss, wrt="x")      # d(dloss/dw)/dx -> f64[N,N]
    hv = adc.hvp(m.loss, wrt="w")          # loss_hvp(w, x, dw) -> H·dw, H never formed
    y, dy = adc.jvp(m.loss, (w, x), (dw, None))    # forward mode: loss and its derivative along dw
    per_example = adc.vmap(dloss, in_axes=(None, 0))   # loss_grad over a batch of x: f64[NB, N]

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

import numpy as np

from adc.runtime.derivatives import compiled, embedded_derivative, shippable
from adc.runtime.kernel import Kernel, as_kernel
from adc.runtime.sparse_derivatives import SparseJacobian, as_matrix, compiled_sparse, kernel_patterns
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


def jacobian(kernel: Kernel, wrt=None, mode: str = "auto", sparse: bool = False):
    """The kernel (x...) -> (J_i for i in wrt), J_i of shape result.shape + x_i.shape, of a kernel
    with one float result; `mode` "auto", "forward" or "reverse" (see the module's docstring).
    `sparse`: for one parameter, a SparseJacobian (adc/runtime/sparse_derivatives.py) whose call
    gives the Jacobian as a scipy.sparse CSR matrix of (result size × wrt size); the one its shared
    object holds (CSC) when it was compiled with --sparse-jacobian."""
    if sparse:
        _one_parameter("jacobian", wrt)
        kernel = as_kernel(kernel, "adc.jacobian")
        (i,) = parameter_indices("jacobian", kernel, 0 if wrt is None else wrt)
        _check_result("jacobian", kernel, (i,))
        mode = _mode("jacobian", mode)
        return compiled_sparse(kernel, i, False, mode) or SparseJacobian(kernel, i, mode)
    return transformed("jacobian", kernel, wrt, _mode("jacobian", mode))


def jacobian_sparsity(kernel: Kernel, *example_args, wrt=0):
    """The Jacobian pattern of `kernel`'s one float result in its parameter `wrt`, at the sizes of
    `example_args` (and the values of its integer ones; float values are not read): a
    scipy.sparse boolean CSR matrix of (result size × wrt size), rows in the result's row-major
    order; without SciPy, its (indptr, indices, shape)."""
    _one_parameter("jacobian_sparsity", wrt)
    kernel = as_kernel(kernel, "adc.jacobian_sparsity")
    (i,) = parameter_indices("jacobian_sparsity", kernel, wrt)
    _check_result("jacobian_sparsity", kernel, (i,))
    (pattern,) = kernel_patterns(kernel, example_args, i)
    return as_matrix(pattern)


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


def hessian(kernel: Kernel, wrt=0, mode: str = "auto", sparse: bool = False):
    """The kernel (x...) -> d² result / d x², of shape x.shape + x.shape, for one parameter `wrt`
    of a kernel with one scalar float result: forward-over-reverse, or reverse-over-reverse with
    mode="reverse". `sparse`: a SparseJacobian of the gradient kernel, star- or acyclically colored
    (compressed Hessian-vector products), giving the Hessian as a scipy.sparse CSR matrix; the one its shared
    object holds (CSC) when it was compiled with --sparse-hessian."""
    _one_parameter("hessian", wrt)
    if sparse:
        kernel = as_kernel(kernel, "adc.hessian")
        (i,) = parameter_indices("hessian", kernel, wrt)
        _check_result("hessian", kernel, (i,))
        return compiled_sparse(kernel, i, True) or SparseJacobian(grad(kernel, i), i, "forward", symmetric=True)
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
    kernel = as_kernel(kernel, "adc.jvp")
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
    """`kernel` over a new leading axis of the params `params`, the others shared by every example;
    every result gets the axis in front: adc.vmap with those axes, which the PyTorch and JAX
    bridges run their vmap rules with."""
    return vmap(kernel, tuple(0 if i in params else None for i in range(len(kernel.signature.param_names))), 0)


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
    kernel = as_kernel(kernel, f"adc.{transform}")
    wanted = parameter_indices(transform, kernel, wrt)
    _check_result(transform, kernel, wanted)
    embedded_derivative(kernel)     # a --no-gradients module raises its LookupError
    derivation = DERIVATIONS[transform, mode]
    return kernel.derived.get(transform, (mode, wanted), lambda: shippable(
        compiled(kernel, derivation, wanted), _transformed_again, kernel, transform, wanted, mode)).kernel


def _transformed_again(kernel: Kernel, transform: str, wanted: tuple[int, ...], mode: str | None) -> Kernel:
    return transformed(transform, kernel, wanted, mode)


def vmap(kernel: Kernel, in_axes=0, out_axes=0) -> Kernel:
    """The kernel mapped over a batch of examples (jax.vmap, torch.func.vmap), compiled by the
    batching pass — one native call for the whole batch, work shared by the examples done once.
    `in_axes`: an int (every parameter batched along that axis), None, or a tuple or list with
    one int or None per parameter (None: shared by every example); `out_axes`: an int, or one per
    result. Axes may be negative, counted on the batched array. The batch size is a new dimension
    symbol of the kernel (NB), bound by its arguments like any."""
    kernel = as_kernel(kernel, "adc.vmap")
    sig = kernel.signature
    ins = batch_axes("in_axes", in_axes, sig.param_names, sig.param_types, "parameter")
    if all(a is None for a in ins):
        raise ValueError(f"adc.vmap: in_axes={in_axes!r} batches no parameter of {sig}; give at least one an axis")
    names = [f"result {j}" for j in range(len(sig.result_types))]
    outs = batch_axes("out_axes", out_axes, names, sig.result_types, "result", shared=False)
    return kernel.derived.get("vmap", (ins, outs), lambda: shippable(
        compiled(kernel, "vmap", (ins, outs)), vmap, kernel, ins, outs)).kernel


def batch_axes(what: str, axes, names, types, noun: str, shared: bool = True) -> tuple[int | None, ...]:
    """`axes` (one int or None for all, or one per entry of `names`) checked against the ranks of
    `types` with the batch axis added, made non-negative; errors name `what` and the entry."""
    entries = list(axes) if isinstance(axes, (list, tuple)) else [axes] * len(names)
    if len(entries) != len(names):
        raise ValueError(f"adc.vmap: {what} has {len(entries)} entries for {len(names)} {noun}s "
                         f"({', '.join(map(str, names))})")
    checked = []
    for name, t, axis in zip(names, types, entries):
        if axis is None and shared:
            checked.append(None)
            continue
        if not isinstance(axis, int) or isinstance(axis, bool):
            allowed = "an int or None" if shared else "an int (every result carries the batch axis)"
            raise TypeError(f"adc.vmap: {what} entry for {noun} {name!r} must be {allowed}, got {axis!r}")
        if not -(t.rank + 1) <= axis <= t.rank:
            raise ValueError(f"adc.vmap: {what} entry {axis} for {noun} {name!r} ({t}) is out of range: "
                             f"batched, it has {t.rank + 1} axes")
        checked.append(axis % (t.rank + 1))
    return tuple(checked)


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
