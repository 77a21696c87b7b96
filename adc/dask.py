"""adc kernels over Dask arrays: blockwise calls, per-example derivatives, and gradients summed
over every block — on Dask's threaded scheduler or a `distributed` cluster.

A Dask argument is chunked along its batch axis only (`batch_axis`, the same for every Dask
argument, whose chunks must agree); every other argument — a NumPy array, a Tensor, a scalar —
is a parameter, sent once and given to every block. The kernel runs once per block, so the
kernel's batch dimension symbol (the one at the batch axis of its Dask parameters) takes each
block's size. Shapes, dtypes and chunks are checked here, before any task runs, with the
kernel's own checks on each block's shape. Kernels reach worker processes by value (module.py).

    x = da.from_array(x_np, chunks=(100_000, 8))            # examples along axis 0
    y = adc.dask.map_kernel(m.dense, x, w, b)               # a lazy Dask array, chunked like x
    j = adc.dask.per_example(m.losses, x, t, w, b, wrt="w") # per-example d loss_i / d w: [N, *w.shape]
    gw, gb = adc.dask.gradient(m.loss_sum, x, t, w, b, wrt=("w", "b"), reduce="mean")

Needs the `dask` extra: pip install adc[dask].
"""
from __future__ import annotations

import operator

import numpy as np

from adc.ir.types import SymDim, evaluate_dim
from adc.runtime.functional import grad, jacobian, parameter_indices
from adc.runtime.kernel import Kernel, as_kernel
from adc.runtime.ops import reshape
from adc.runtime.tape import GradientTape
from adc.runtime.tensor import Tensor

REDUCTIONS = ("sum", "mean")


def _dask():
    """dask and dask.array, or an ImportError saying how to install them."""
    try:
        import dask
        import dask.array as da
    except ImportError as err:
        raise ImportError(f"adc.dask needs Dask ({err}): pip install adc[dask]") from None
    return dask, da


def map_kernel(kernel: Kernel, *args, batch_axis: int = 0):
    """`kernel` applied to each block of its Dask arguments: one lazy Dask array per result.
    A result with the batch dimension is chunked along it like the inputs; a result without it
    (a block's loss) has one row per block, stacked on a new leading axis."""
    kernel = as_kernel(kernel, "adc.dask.map_kernel")
    plan = _Plan("map_kernel", kernel, args, batch_axis)
    return plan.arrays(_call, (kernel,), plan.result_specs(kernel), _result_dtypes(kernel))


def per_example(kernel: Kernel, *args, wrt=None, batch_axis: int = 0):
    """Per-example derivatives, blockwise. With `wrt` None, `kernel` is a derivative already (e.g.
    adc.jacobian of a per-example loss) whose every result has the batch dimension: it is mapped.
    With `wrt` (parameter names or indices), `kernel` returns per-example values y [B, ...] and
    the result is, per entry of wrt, d y_i / d (that parameter): for a parameter p, [B, ..., *p.shape]
    (forward mode, one JVP per element of p: reverse mode would cost the block size squared);
    for a Dask argument x, its batch Jacobian [B, ..., *x.shape[1:]] (tape.batch_jacobian)."""
    kernel = as_kernel(kernel, "adc.dask.per_example")
    plan = _Plan("per_example", kernel, args, batch_axis)
    if wrt is None:
        return _mapped_derivative(plan, kernel)
    wanted = parameter_indices("dask.per_example", kernel, wrt)
    shared = tuple(i for i in wanted if i not in plan.dask_positions)
    batched = tuple(i for i in wanted if i in plan.dask_positions)
    (y_shape, y_axis), = plan.result_specs(kernel) if len(kernel.signature.result_types) == 1 else [(None, None)]
    if y_axis != 0:
        raise ValueError(f"adc.dask.per_example: {kernel.signature} must return one tensor whose first axis is the "
                         f"batch dimension {plan.symbol}")
    if batched and plan.batch_axis != 0:
        raise ValueError("adc.dask.per_example: batch Jacobians w.r.t. Dask arguments need batch_axis=0")
    derivative = jacobian(kernel, wrt=shared, mode="forward") if shared else None
    specs = dict(zip(shared, plan.result_specs(derivative))) if shared else {}
    for i in batched:
        specs[i] = (lambda b, i=i: y_shape(b) + plan.block_shape(i, b)[1:], 0)
    # the kernel itself only where a block runs it (batch Jacobians): otherwise its derivative alone is sent
    return plan.arrays(_per_example_block, (kernel if batched else None, derivative, shared, batched, wanted),
                       [specs[i] for i in wanted], [kernel.signature.result_types[0].dtype.numpy] * len(wanted))


def _mapped_derivative(plan: _Plan, kernel: Kernel):
    """per_example of a derivative kernel: mapped, once each result is checked to be per example."""
    specs = plan.result_specs(kernel)
    for i, (_, axis) in enumerate(specs):
        if axis is None:
            raise ValueError(f"adc.dask.per_example: result {i} of {kernel.signature} has no batch dimension "
                             f"{plan.symbol}, so it is not per example (give wrt= to differentiate {kernel.__name__})")
    return plan.arrays(_call, (kernel,), specs, _result_dtypes(kernel))


def gradient(loss_kernel: Kernel, *args, wrt=None, reduce: str = "sum", batch_axis: int = 0, split_every: int = 8):
    """The gradient w.r.t. the parameters `wrt` (default: every float parameter that is not a Dask
    argument) of a loss over all the examples: `loss_kernel` returns the *sum* of its block's
    per-example losses; reduce="sum" differentiates the sum over every block, "mean" that sum divided
    by the number of examples. The blocks' gradients are added in a tree (`split_every` per node).
    One lazy Dask array per entry of wrt (a single one when wrt names one parameter)."""
    loss_kernel = as_kernel(loss_kernel, "adc.dask.gradient")
    if reduce not in REDUCTIONS:
        raise ValueError(f"adc.dask.gradient: reduce must be one of {', '.join(map(repr, REDUCTIONS))}, got {reduce!r}")
    plan = _Plan("gradient", loss_kernel, args, batch_axis)
    sig = loss_kernel.signature
    if wrt is None:
        wrt = tuple(i for i, t in enumerate(sig.param_types) if t.dtype.is_float and i not in plan.dask_positions)
    wanted = parameter_indices("dask.gradient", loss_kernel, wrt)
    for i in wanted:
        if i in plan.dask_positions:
            raise ValueError(f"adc.dask.gradient: parameter '{sig.param_names[i]}' is a Dask argument, split in "
                             f"blocks; its derivative is per example: use adc.dask.per_example")
    dask, da = _dask()
    partials = list(plan.calls(_call, (grad(loss_kernel, wrt=wanted),)).to_delayed())
    while len(partials) > 1:
        partials = [dask.delayed(_add, pure=True)(*partials[k:k + split_every])
                    for k in range(0, len(partials), split_every)]
    total = partials[0]
    if reduce == "mean":
        total = dask.delayed(_mean, pure=True)(total, plan.examples)
    grads = tuple(da.from_delayed(total[k], shape=plan.param_shape(i), dtype=sig.param_types[i].dtype.numpy)
                  for k, i in enumerate(wanted))
    return grads[0] if len(grads) == 1 else grads


def _result_dtypes(kernel: Kernel) -> list:
    return [t.dtype.numpy for t in kernel.signature.result_types]


class _Plan:
    """The checked arguments of one blockwise call: which are Dask arrays, their common batch
    chunks and batch dimension symbol, and the parameters as Dask values sent once."""

    def __init__(self, caller: str, kernel: Kernel, args: tuple, batch_axis: int):
        dask, da = _dask()
        sig = kernel.signature
        if len(args) != len(sig.param_names):
            raise TypeError(f"adc.dask.{caller}: {sig} takes {len(sig.param_names)} arguments, got {len(args)}")
        self.caller, self.kernel, self.args = caller, kernel, args
        self.dask_positions = tuple(i for i, a in enumerate(args) if isinstance(a, da.Array))
        if not self.dask_positions:
            raise TypeError(f"adc.dask.{caller}: no argument of {sig.name} is a Dask array; call the kernel directly")
        self.batch_axis = batch_axis
        self.chunks = self._batch_chunks()
        self.examples = sum(self.chunks)
        self.symbol = self._batch_symbol()
        self.sizes = {b: self._check_block(b) for b in set(self.chunks)}
        self.params = [None if i in self.dask_positions else dask.delayed(_as_array(a), pure=True)
                       for i, a in enumerate(args)]

    def _where(self, i: int) -> str:
        return f"adc.dask.{self.caller}: parameter '{self.kernel.signature.param_names[i]}'"

    def _axis(self, i: int) -> int:
        ndim = self.args[i].ndim
        if not -ndim <= self.batch_axis < ndim:
            raise ValueError(f"{self._where(i)} has {ndim} axes, so it has no batch axis {self.batch_axis}")
        return self.batch_axis % ndim

    def _batch_chunks(self) -> tuple[int, ...]:
        """The batch axis' chunks, once each Dask argument is checked to be split along it only
        and to have the same chunks as the first."""
        first = None
        for i in self.dask_positions:
            arg, axis = self.args[i], self._axis(i)
            for other, chunks in enumerate(arg.chunks):
                if other != axis and len(chunks) > 1:
                    raise ValueError(f"{self._where(i)} is split along axis {other} (chunks {chunks}); only its "
                                     f"batch axis {axis} may be: rechunk it, e.g. x.rechunk({{{other}: -1}})")
            if first is None:
                first = i
            elif arg.chunks[axis] != self.args[first].chunks[self._axis(first)]:
                names = self.kernel.signature.param_names
                raise ValueError(f"adc.dask.{self.caller}: parameters '{names[first]}' and '{names[i]}' are chunked "
                                 f"differently along the batch axis: {self.args[first].chunks[self._axis(first)]} "
                                 f"and {arg.chunks[axis]}; rechunk one like the other")
        return self.args[first].chunks[self._axis(first)]

    def _batch_symbol(self) -> str:
        """The kernel's batch dimension: the one symbol at the batch axis of every Dask parameter."""
        sig = self.kernel.signature
        for i, (ptype, arg) in enumerate(zip(sig.param_types, self.args)):
            if isinstance(arg, (np.ndarray, np.generic, Tensor)) or i in self.dask_positions:
                if arg.dtype != ptype.dtype.numpy:
                    raise TypeError(f"{self._where(i)} expects dtype {ptype.dtype} ({ptype.dtype.numpy}), "
                                    f"got {arg.dtype}")
        symbols = {}
        for i in self.dask_positions:
            ptype, arg = sig.param_types[i], self.args[i]
            if arg.ndim != ptype.rank:
                raise ValueError(f"{self._where(i)} expects rank {ptype.rank} ({ptype}), got a Dask array of "
                                 f"shape {arg.shape}")
            dim = ptype.shape[self._axis(i)]
            if not (isinstance(dim, SymDim) and dim.is_symbol):
                raise ValueError(f"{self._where(i)} is {ptype}: its batch axis {self._axis(i)} must be a dimension "
                                 f"symbol, to take each block's size")
            symbols[str(dim)] = i
        if len(symbols) > 1:
            shown = ", ".join(f"{s} (parameter '{sig.param_names[i]}')" for s, i in symbols.items())
            raise ValueError(f"adc.dask.{self.caller}: the Dask arguments' batch axes are different dimensions of "
                             f"{sig.name}: {shown}; blockwise needs one")
        return next(iter(symbols))

    def block_shape(self, i: int, size: int) -> tuple[int, ...]:
        shape = list(np.shape(self.args[i]))
        if i in self.dask_positions:
            shape[self._axis(i)] = size
        return tuple(shape)

    def param_shape(self, i: int) -> tuple[int, ...]:
        return tuple(np.shape(self.args[i]))

    def _check_block(self, size: int) -> dict[str, int]:
        """The dimension sizes of a block of `size` examples, by the kernel's own shape checks."""
        return self.kernel.bind_shapes([self.block_shape(i, size) for i in range(len(self.args))])

    def result_specs(self, kernel: Kernel) -> list:
        """(block size -> block shape, batch axis or None) for each result of `kernel` (this
        kernel, or a derivative of it with the same parameters)."""
        specs = []
        for k, rtype in enumerate(kernel.signature.result_types):
            axes = [a for a, d in enumerate(rtype.shape) if isinstance(d, SymDim) and self.symbol in d.symbols]
            if len(axes) > 1 or any(not rtype.shape[a].is_symbol for a in axes):
                raise ValueError(f"adc.dask.{self.caller}: result {k} of {kernel.signature.name} is {rtype}: its "
                                 f"batch dimension {self.symbol} must be one whole axis to be computed blockwise")
            specs.append((lambda b, t=rtype: tuple(evaluate_dim(d, self.sizes[b]) for d in t.shape),
                          axes[0] if axes else None))
        return specs

    def calls(self, function, leading: tuple):
        """`function(*leading, *block arguments)` per block, as one blockwise layer: a Dask array of
        object dtype, chunked like the batch axis, whose blocks are the calls' results."""
        _, da = _dask()
        indexed = [(function, None), (tuple(len(leading) + i for i in self.dask_positions), None)]
        indexed += [(sent_once(value), None) for value in leading]
        for i, arg in enumerate(self.args):
            if i in self.dask_positions:    # the batch axis is index "b", every other axis one chunk of its own
                axis = self._axis(i)
                indexed.append((arg, tuple("b" if a == axis else f"{i}.{a}" for a in range(arg.ndim))))
            else:
                indexed.append((self.params[i], None))
        # concatenate=False: a block arrives as a list per other axis, not copied by a concatenation
        return da.blockwise(_on_blocks, ("b",), *(x for pair in indexed for x in pair), align_arrays=False,
                            concatenate=False, dtype=object, meta=np.empty((0,), dtype=object))

    def arrays(self, function, leading: tuple, specs: list, dtypes: list):
        """`function(*leading, *block arguments)` per block, a tuple with one array per spec, as
        Dask arrays: chunked along their batch axis like the inputs, or stacked when they have none.
        Blockwise layers, not a task per block and result: the calls, then one per result taking
        its part of each call's tuple, which Dask fuses with the blockwise work that reads it."""
        _, da = _dask()
        calls = self.calls(function, leading)
        results = []
        for k, ((shape, axis), dtype) in enumerate(zip(specs, dtypes)):
            dims = shape(self.chunks[0])    # every axis but the batch axis has one size for all blocks
            part, adjust = (_stacked_item, {"b": 1}) if axis is None else (operator.getitem, None)
            index = ("b", *(f"r{a}" for a in range(len(dims)))) if axis is None else \
                tuple("b" if a == axis else f"r{a}" for a in range(len(dims)))
            new_axes = {f"r{a}": n for a, n in enumerate(dims) if axis != a}
            results.append(da.blockwise(part, index, calls, ("b",), k, None, new_axes=new_axes, adjust_chunks=adjust,
                                        dtype=dtype, meta=np.empty((0,) * len(index), dtype=dtype)))
        return results[0] if len(results) == 1 else tuple(results)


def sent_once(value):
    """A kernel as one value of the graph that its tasks share: pickled once, sent once to each
    worker, rather than once per task."""
    dask, _ = _dask()
    return dask.delayed(value, pure=False) if isinstance(value, Kernel) else value


def _as_array(value):
    """A parameter as NumPy sends it (a Tensor's array; scalars and arrays as they are)."""
    return value.numpy() if isinstance(value, Tensor) else value


def _on_blocks(function, listed: tuple[int, ...], *args):
    """`function(*args)`, the arguments at `listed` (Dask arguments) taken out of the lists
    blockwise wraps them in, one level per axis other than the batch axis (each one chunk)."""
    args = list(args)
    for i in listed:
        while isinstance(args[i], list):
            args[i], = args[i]
    return function(*args)


def _call(kernel: Kernel, *args) -> tuple[np.ndarray, ...]:
    """One block's call: the kernel's results as a tuple of NumPy arrays."""
    results = kernel(*args)
    return tuple(np.asarray(r) for r in (results if isinstance(results, tuple) else (results,)))


def _stacked_item(results: tuple, k: int) -> np.ndarray:
    """Result `k` of a block's call as one row of its stack: a new leading axis of length 1."""
    return results[k][np.newaxis]


def _per_example_block(kernel: Kernel | None, derivative: Kernel | None, shared: tuple[int, ...],
                       batched: tuple[int, ...], wanted: tuple[int, ...], *args) -> tuple[np.ndarray, ...]:
    """One block's per-example derivatives, in the order of `wanted`: the forward Jacobian's
    rows for the `shared` parameters, batch Jacobians for the `batched` (Dask) arguments."""
    found = dict(zip(shared, _call(derivative, *args))) if derivative is not None else {}
    if batched:
        tensors = [Tensor(a) if i in batched else a for i, a in enumerate(args)]     # watchable
        with GradientTape(persistent=True) as tape:
            for i in batched:
                tape.watch(tensors[i])
            y = kernel(*tensors)
            rows = reshape(y, (y.shape[0], -1)) if y.ndim == 1 else y    # batch_jacobian wants rank >= 2
        for i in batched:
            found[i] = np.asarray(tape.batch_jacobian(rows, tensors[i])).reshape(y.shape + tensors[i].shape[1:])
    return tuple(found[i] for i in wanted)


def _add(*partials: tuple) -> tuple[np.ndarray, ...]:
    """A node of the gradient's tree reduction: the partial sums, added parameter by parameter."""
    return tuple(np.sum(parts, axis=0) for parts in zip(*partials))


def _mean(total: tuple, examples: int) -> tuple[np.ndarray, ...]:
    return tuple(t / examples for t in total)
