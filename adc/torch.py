"""adc.torch: adc kernels as PyTorch operators, differentiable and batchable by PyTorch.

    import adc, adc.torch
    m = adc.compile_file("samples/nn.adc")
    loss = adc.torch.op(m.cross_entropy)            # takes and returns torch tensors
    loss(logits, labels).backward()                  # through adc's compiled VJP kernel
    torch.library.opcheck(loss.op, (logits, labels))
    adc.torch.ops(m).attention(q, k, v)              # every kernel of a module

Each kernel becomes a `torch.library.custom_op` (`adc::<kernel>_<n>`, `.op`): its fake kernel
gives the result shapes and dtypes from the signature's symbolic dimensions, so
`torch.compile(fullgraph=True)` traces it without a graph break; its vmap rule runs the kernel
the batching pass made (`functional.batched`), one call for the whole batch. The callable calls
it through a `torch.autograd.Function` with `setup_context` whose backward calls the kernel's
VJP kernel, itself such an operator: so double backward is adc's second-order VJP, and
`torch.func.grad` and `torch.func.vmap` compose (a custom_op's own `register_autograd` is
not seen by torch.func's transforms: pytorch #168393). Its jvp calls the kernel's tangents-only
JVP kernel, also such an operator, so `torch.func.jvp` and `jacfwd` work to any order. The custom
op carries the same backward formula, so `.op` alone is differentiable too (opcheck tests it);
forward mode goes through the Function only (torch.func's transforms).

CPU tensors cross without copies: an eager call hands the kernel their addresses and results
torch allocates (`Kernel.run_at`); other calls adc Tensors over the tensors' memory in
(`Tensor.view_of`), `torch.from_numpy` out (the result buffers adc allocated). A parameter of the wrong dtype, rank or device, or a non-contiguous one, is a
TypeError or ValueError naming it, before anything runs.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch
from torch.autograd import forward_ad
from torch.utils._python_dispatch import is_in_torch_dispatch_mode

from adc.runtime.functional import batched, tangent_derivative, value_and_grad
from adc.runtime.kernel import Kernel
from adc.runtime.module import Module
from adc.runtime.recording import thread_state
from adc.runtime.tensor import Tensor

_TORCH_DTYPES = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
                 np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64, np.dtype(np.bool_): torch.bool}
_PLAIN = (torch.Tensor, torch.nn.Parameter)      # what eager code passes (not a subclass wrapping it)
ALLOCATIONS_KEPT = 64      # argument shapes per kernel whose sizes and result specs an eager call keeps
_names = itertools.count()     # custom ops are registered once per process: each kernel gets a fresh name


def op(kernel: Kernel) -> "KernelOp":
    """The kernel as a PyTorch operator (one per kernel: asked again, the same one), its VJP
    compiled now: a backward that torch.compile traces must find its operator registered."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"adc.torch.op: expects a compiled adc kernel (e.g. module.f), got {type(kernel).__name__}")
    made = _op_of(kernel)
    made.function.plan = made.backward_plan()
    return made


def _op_of(kernel: Kernel) -> "KernelOp":
    return kernel.derived.get("torch_op", None, lambda: KernelOp(kernel))


class ops:
    """Every kernel of a module as a PyTorch operator, by attribute: `adc.torch.ops(m).f`."""

    def __init__(self, module: Module):
        self._module = module

    def __getattr__(self, name: str) -> "KernelOp":
        return op(getattr(self._module, name))

    def __dir__(self):
        return dir(self._module)


class KernelOp:
    """One adc kernel as PyTorch sees it: the custom op (`.op`) and the autograd.Function the
    call goes through. Derivative kernels become KernelOps of their own when first needed."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        sig = kernel.signature
        self._dtypes = tuple(_TORCH_DTYPES[t.dtype.numpy] for t in sig.param_types)
        self._ranks = tuple(t.rank for t in sig.param_types)
        self._result_dtypes = tuple(_TORCH_DTYPES[t.dtype.numpy] for t in sig.result_types)
        self._floats = tuple(i for i, t in enumerate(sig.param_types) if t.dtype.is_float)
        self.__name__ = sig.name
        self.__doc__ = f"adc kernel {sig} as a PyTorch operator"
        name = f"{sig.name}_{next(_names)}"
        self.op = torch.library.custom_op(f"adc::{name}", self._run, mutates_args=(), schema=_schema(kernel))
        self.overload = getattr(torch.ops.adc, name).default     # what traced code calls (Dynamo, vmap rules)
        self.op.register_fake(self._fake)
        self.op.register_vmap(self._vmap)
        self.function = _function(self)
        # the eager Function's apply without torch's Python wrapper, which only matters under
        # torch.func's transforms (`dispatch` sends those calls to `function`)
        self.eager = super(torch.autograd.Function, _eager_function(self)).apply
        self.op.register_autograd(self.function.backward, setup_context=_save_inputs)

    def __repr__(self) -> str:
        return f"<adc.torch op {self.kernel.signature}>"

    def __deepcopy__(self, memo: dict) -> "KernelOp":
        """Itself, as a function is: a module holding the op (its loss, say) deep-copies."""
        return self

    def __reduce__(self):
        """By its kernel, which travels by value: a pickled module holding the op loads elsewhere."""
        return op, (self.kernel,)

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != len(self._dtypes):
            args = self.kernel.__signature__.bind(*args, **kwargs).args
        if not self._fits(args):
            args = tuple(self._checked(i, a) for i, a in enumerate(args))
        return self.dispatch(*args)

    def _fits(self, args: tuple) -> bool:
        """Whether every argument is a plain CPU tensor of its parameter's dtype and rank,
        contiguous: the common call, accepted in one pass (`_checked` converts the others or
        names the mistake)."""
        for value, dtype, rank in zip(args, self._dtypes, self._ranks):
            if (type(value) not in _PLAIN or value.dtype is not dtype or value.dim() != rank
                    or not value.is_cpu or not value.is_contiguous()):
                return False
        return True

    def dispatch(self, *args: torch.Tensor):
        """The call on checked arguments, by the cheapest route that keeps every derivative: the op
        when torch.compile traces it or a dispatch mode (fake tensors, tracing) must see it; the
        Function under torch.func's transforms and forward-mode AD (its jvp); in eager mode the
        kernel itself, through the eager Function when autograd records the call."""
        if torch.compiler.is_compiling():
            return self.overload(*args)
        if _transforming() or any(map(_is_transformed, args)):
            return self.function.apply(*args)
        if not _plain(args):
            return self.overload(*args)
        if torch.is_grad_enabled() and any(args[i].requires_grad for i in self._floats):
            return self.eager(*args)
        return _native(self.kernel, args, self._fits(args))

    def _checked(self, i: int, value: Any) -> torch.Tensor:
        """The argument for parameter i: a CPU tensor of its dtype and rank, contiguous (a Python
        number becomes a tensor of the parameter's dtype), or the error naming the parameter."""
        sig = self.kernel.signature
        where = f"{sig.name}: parameter '{sig.param_names[i]}'"
        if not isinstance(value, torch.Tensor):
            if isinstance(value, (bool, int, float)):
                return torch.tensor(value, dtype=self._dtypes[i])
            raise TypeError(f"{where} expects a torch.Tensor of {sig.param_types[i]}, got {type(value).__name__}")
        if value.dtype != self._dtypes[i]:
            raise TypeError(f"{where} expects dtype {self._dtypes[i]} ({sig.param_types[i]}), got {value.dtype}; "
                            f"convert it with .to({self._dtypes[i]})")
        if value.device.type != "cpu":
            raise ValueError(f"{where} expects a CPU tensor, got one on {value.device}; move it with .cpu()")
        if value.dim() != sig.param_types[i].rank:
            raise ValueError(f"{where} expects rank {sig.param_types[i].rank} ({sig.param_types[i]}), "
                             f"got a tensor of shape {tuple(value.shape)}")
        if not value.is_contiguous() and not _is_batched(value):
            raise ValueError(f"{where} expects a contiguous tensor (adc reads row-major data), got strides "
                             f"{value.stride()}; pass .contiguous()")
        return value

    def _run(self, *args: torch.Tensor):
        return _native(self.kernel, args, self._fits(args))

    def _fake(self, *args: torch.Tensor):
        """Empty results of the shapes and dtypes the signature gives for these inputs."""
        env = self.kernel.bind_shapes([tuple(a.shape) for a in args])
        results = tuple(args[0].new_empty([_size(d, env) for d in t.shape], dtype=dtype)
                        for t, dtype in zip(self.kernel.signature.result_types, self._result_dtypes))
        return results[0] if len(results) == 1 else results

    def _vmap(self, info, in_dims: tuple, *args):
        """One call of the batched kernel: the batched params' batch axes moved first."""
        moved = tuple(i for i, d in enumerate(in_dims) if d is not None)
        args = [a if d is None else a.movedim(d, 0).contiguous() for a, d in zip(args, in_dims)]
        results = _op_of(batched(self.kernel, moved)).overload(*args)
        return results, 0 if type(results) is not tuple else (0,) * len(results)

    def backward_plan(self) -> tuple:
        """(wrt, passthrough, the VJP kernel's KernelOp or None when the cotangents pass through):
        what the backward needs, the VJP kernel compiled on the first request."""
        return _plan(self.kernel.derivative(self._floats) if self._floats else None)

    def tangent_plan(self, moving: tuple[int, ...]) -> tuple:
        """The same for forward mode, the params in `moving` having tangents: the tangents-only JVP
        kernel, mapping (inputs, tangents of wrt) to the float results' tangents."""
        return _plan(tangent_derivative(self.kernel, moving) if moving else None)


def _plan(derivative) -> tuple:
    if derivative is None or not derivative.wrt:
        return (), (), None
    return derivative.wrt, derivative.passthrough, _op_of(derivative.kernel) if derivative.needs_call else None


def _apply(kernel_op: KernelOp, *args) -> tuple:
    """A derivative kernel's call inside a backward or a jvp, by its KernelOp's route: under
    torch.func's transforms its autograd.Function, which they see (so derivatives compose); under
    torch.compile its op (its own autograd registered), as Dynamo traces no autograd.Function
    nested in a backward; in eager mode the kernel itself (through its eager Function when the
    backward builds a graph: double backward)."""
    results = kernel_op.dispatch(*args)
    return results if type(results) is tuple else (results,)


def _function(kernel_op: KernelOp) -> type:
    """The autograd.Function calling the op (plain functions: Dynamo traces those, not bound methods)."""
    overload = kernel_op.overload

    def forward(*args):
        return overload(*args)

    def backward(ctx, *cts):
        """The params' cotangents from the VJP kernel, itself an autograd.Function: double backward."""
        plan = function.plan
        if plan is None:        # (`op` plans ahead: code torch.compile traces never comes here)
            plan = function.plan = function.kernel_op.backward_plan()
        wrt, passthrough, vjp = plan
        inputs = ctx.saved_tensors
        if vjp is not None:     # (autograd gives zeros for the results nothing reached)
            outgoing = _apply(vjp, *inputs, *(ct.contiguous() for ct in cts))
        else:
            outgoing = tuple(cts[p] for p in passthrough)
        grads = [None] * len(inputs)
        for i, grad in zip(wrt, outgoing):
            grads[i] = grad
        return tuple(grads)

    def jvp(ctx, *tangents):
        """The results' tangents from the JVP kernel, itself an autograd.Function: forward over
        forward (jacfwd of jacfwd) and reverse over forward compose."""
        wrt, passthrough, push = kernel_op.tangent_plan(tuple(i for i in kernel_op._floats if tangents[i] is not None))
        if push is not None:
            moved = _apply(push, *ctx.saved_tensors, *(tangents[i].contiguous() for i in wrt))
        else:
            moved = tuple(tangents[wrt[p]] for p in passthrough)
        moved = iter(moved)
        outs = tuple(next(moved) if wrt and dtype.is_floating_point else None for dtype in kernel_op._result_dtypes)
        return outs[0] if len(outs) == 1 else outs

    function = type(f"{kernel_op.__name__}_function", (torch.autograd.Function,), {
        "forward": staticmethod(forward), "setup_context": staticmethod(_save_for_both),
        "backward": staticmethod(backward), "jvp": staticmethod(jvp), "generate_vmap_rule": True, "plan": None,
        "kernel_op": kernel_op, "overload": overload})
    return function


def _eager_function(kernel_op: KernelOp) -> type:
    """The autograd.Function of an eager call that autograd records: the kernel run directly, with
    no dispatcher in between. A kernel whose one result is a float scalar (a loss) runs its
    value-and-gradient kernel instead (adc.value_and_grad: one call, the forward work done once),
    and its backward only scales those gradients by the cotangent, so a training step makes one
    native call. A backward that builds a graph (double backward) calls the VJP kernel, as the
    op's own backward does."""
    function = kernel_op.function
    result_types = kernel_op.kernel.signature.result_types
    loss = len(result_types) == 1 and result_types[0].rank == 0 and result_types[0].dtype.is_float
    fused = {}      # ctx.needs_input_grad -> (its value-and-gradient kernel, each param's gradient's slot)

    def forward(ctx, *args):
        ctx.save_for_backward(*args)
        if loss:
            needs = ctx.needs_input_grad
            kernel, ctx.slots = fused.get(needs) or fused.setdefault(needs, _fused(kernel_op, needs))
            value, *ctx.gradients = _native(kernel, args, kernel_op._fits(args))   # (not the value: a cycle)
            return value
        results = _native(kernel_op.kernel, args, kernel_op._fits(args))
        _mark_integers(ctx, results)
        return results

    def backward(ctx, *cts):
        gradients = getattr(ctx, "gradients", None)
        if gradients is None or torch.is_grad_enabled():
            return function.backward(ctx, *cts)
        (ct,) = cts
        if ct.item() == 1.0:    # loss.backward()'s seed: the gradients as they are, no product made
            return tuple(None if k is None else gradients[k] for k in ctx.slots)
        return tuple(None if k is None else gradients[k] * ct for k in ctx.slots)

    return type(f"{kernel_op.__name__}_eager_function", (torch.autograd.Function,), {
        "forward": staticmethod(forward), "backward": staticmethod(backward)})


def _fused(kernel_op: KernelOp, needs: tuple[bool, ...]) -> tuple:
    """The value-and-gradient kernel w.r.t. the float params autograd wants, and per param the
    place of its gradient among that kernel's gradients (None: no gradient)."""
    wanted = tuple(i for i in kernel_op._floats if needs[i])
    return value_and_grad(kernel_op.kernel, wanted), tuple(wanted.index(i) if i in wanted else None
                                                           for i in range(len(needs)))


def _save_for_both(ctx, inputs: tuple, output) -> None:
    """The Function's: its jvp reads the inputs too (the JVP kernel takes primals and tangents)."""
    _save_inputs(ctx, inputs, output)
    ctx.save_for_forward(*inputs)


def _save_inputs(ctx, inputs: tuple, output) -> None:
    """What a backward reads: the inputs (a VJP kernel takes the primal arguments and the cotangents)."""
    ctx.save_for_backward(*inputs)
    _mark_integers(ctx, output)


def _mark_integers(ctx, output) -> None:
    integers = [o for o in (output if type(output) is tuple else (output,)) if not o.dtype.is_floating_point]
    if integers:    # (Dynamo fails on the call even with none, for a single result)
        ctx.mark_non_differentiable(*integers)


def _schema(kernel: Kernel) -> str:
    sig = kernel.signature
    params = ", ".join(f"Tensor {name}" for name in sig.param_names)
    results = ", ".join("Tensor" for _ in sig.result_types)
    return f"({params}) -> {'Tensor' if len(sig.result_types) == 1 else f'({results})'}"


def _size(dim, env: dict) -> Any:
    return dim if isinstance(dim, int) else dim.evaluate(env)


def _native(kernel: Kernel, args, fits: bool) -> Any:
    """The native call. On arguments that `fits` the params (KernelOp._fits), results in tensors
    torch allocates and the kernel given the tensors' addresses (Kernel.run_at), no NumPy array
    made of either, unless the kernel must read an argument's values first (index bounds) or an
    adc tape or accumulator records kernel calls; else through adc Tensors over the tensors' memory,
    whose call checks them."""
    if fits and not kernel.checks_indices and not thread_state.recording:
        sizes, specs = _allocation(kernel, tuple(a.shape for a in args))
        results = [torch.empty(shape, dtype=dtype) for shape, dtype in specs]
        kernel.run_at(sizes, [a.data_ptr() for a in args] + [r.data_ptr() for r in results])
        return results[0] if len(results) == 1 else tuple(results)
    results = kernel(*(_view(a) for a in args))
    if type(results) is not tuple:
        return _tensor(results.numpy())
    return tuple(_tensor(r.numpy()) for r in results)


def _allocation(kernel: Kernel, shapes: tuple) -> tuple[list[int], list[tuple]]:
    """The dims' sizes for arguments of these shapes and each result's (shape, torch dtype), kept
    per kernel for the shapes last seen (a training loop's are the same at every step; a shape
    that fails the kernel's checks raises and is not kept)."""
    seen = kernel.derived.get("torch_allocation", None, dict)
    found = seen.get(shapes)
    if found is None:
        if len(seen) >= ALLOCATIONS_KEPT:
            seen.clear()
        sizes = kernel.dims_of(shapes)
        found = seen[shapes] = sizes, [(shape, _TORCH_DTYPES[dtype]) for dtype, shape in kernel.result_shapes(sizes)]
    return found


def _plain(args) -> bool:
    """Whether the kernel may read these tensors itself: none a subclass (fake tensors, tracing
    proxies), and no dispatch mode or TorchScript tracer that must see the op."""
    return (not is_in_torch_dispatch_mode() and torch._C._get_tracing_state() is None
            and all(type(a) in _PLAIN for a in args))


def _view(t: torch.Tensor) -> Tensor:
    """An adc Tensor over a CPU tensor's data (no copy; a non-contiguous one is made contiguous),
    its address known: the kernel's fastest path, half the cost of converting a NumPy array."""
    t = t.detach().contiguous()
    return Tensor.view_of(t.numpy(), t.data_ptr())


def _tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor over a fresh result buffer, which nothing else holds: torch may write to it."""
    array.setflags(write=True)
    return torch.from_numpy(array)


def _transforming() -> bool:
    """Whether torch.func's transforms or forward-mode AD are on (then an autograd.Function needs
    setup_context, which the Function has), even for arguments they do not wrap."""
    return forward_ad._current_level >= 0 or torch._C._are_functorch_transforms_active()


def _is_transformed(t: torch.Tensor) -> bool:
    """A tensor a torch.func transform wraps: its transforms see only autograd.Functions (#168393)."""
    return torch._C._functorch.is_functorch_wrapped_tensor(t)


def _is_batched(t: torch.Tensor) -> bool:
    """A tensor torch.func.vmap wraps: its strides are the batch's, checked by the vmap rule."""
    return torch._C._functorch.is_batchedtensor(t)
