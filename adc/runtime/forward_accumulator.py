"""adc.ForwardAccumulator: forward mode over kernel calls and eager ops (tf.autodiff.ForwardAccumulator).

Inside `with adc.ForwardAccumulator(primals, tangents) as acc:`, the accumulator sits on
the same recording stack as the tapes (`thread_state.recording`) and is offered every
finished kernel call (eager ops are kernel calls). A call with an argument that has a
tangent gets its results' tangents from the kernel's tangents-only JVP kernel (the JVP
pass, `adc.jvp`'s derivation without the primal results), called with the accumulator
paused; that call is an ordinary kernel call, so the tapes and outer accumulators
recording around it see it. Hence, with no special case:

- forward-over-backward (TF's Hessian-vector product): a `tape.gradient` computed inside
  the accumulator runs VJP kernels whose arguments have tangents; `acc.jvp(grad)` is H·v;
- backward-over-forward: a tape around the accumulator records the JVP kernel calls, so
  `tape.gradient(acc.jvp(y), x)` differentiates the tangent;
- nested accumulators: the inner one's JVP calls are watched by the outer one.

The primal is computed by the call itself and the tangents by a second kernel, which
recomputes the primal values the tangents need (fused, but twice the forward's
elementwise work; `adc.jvp` computes both in one call). A Python `adc.custom_gradient`
stops forward mode with an error: its backward is Python code, which cannot be
transposed; a `@custom_gradient` kernel of the language is transposed by the compiler.

Invariant: the accumulator holds every object whose id() it uses as a key.

    x = adc.Variable(3.0)
    with adc.ForwardAccumulator(x, adc.constant(1.0)) as acc:
        y = x * x                # mul(x, x) offered: mul's JVP kernel gives dy = 6.0
    acc.jvp(y)                   # 6.0
"""
from __future__ import annotations

import numpy as np

from adc.runtime.functional import pushed, tangent_derivative
from adc.runtime.kernel import Kernel
from adc.runtime.nest import flatten, flatten_like, pack
from adc.runtime.recording import Recorder, thread_state
from adc.runtime.tensor import Tensor, constant
from adc.runtime.unconnected import UnconnectedGradients
from adc.runtime.variable import Variable


class ForwardAccumulator(Recorder):
    """Computes the JVP of every kernel call made inside its `with` block w.r.t. `primals`
    (a Tensor or Variable, or a nest of lists, tuples and dicts of them) along `tangents` (the
    same structure, with a tensor, array, number or nested list of numbers per primal)."""

    def __init__(self, primals, tangents):
        flat_primals = flatten(primals)
        flat_tangents = flatten_like(primals, tangents,
                                     "adc.ForwardAccumulator: the structures of primals and tangents")
        self._tangents: dict[int, Tensor] = {}
        self._held: list = []
        for i, (primal, tangent) in enumerate(zip(flat_primals, flat_tangents)):
            self._watch(primal, self._tangent_for(primal, tangent, i))

    def __enter__(self) -> "ForwardAccumulator":
        thread_state.recording.append(self)
        return self

    def __exit__(self, *exc) -> None:
        thread_state.recording.remove(self)

    def jvp(self, primals, unconnected_gradients=UnconnectedGradients.NONE):
        """The tangent of each of `primals` (a Tensor or Variable, or a nest of lists, tuples,
        namedtuples and dicts of them), in the same structure: None for one that does not depend
        on the watched primals, or zeros with unconnected_gradients='zero'."""
        unconnected = UnconnectedGradients.of(unconnected_gradients, "ForwardAccumulator.jvp")

        def tangent_of(value):
            if not isinstance(value, (Tensor, Variable)):
                raise TypeError(f"ForwardAccumulator.jvp: expects Tensors or Variables (or nested lists, "
                                f"tuples or dicts of them), got {type(value).__name__} {value!r}")
            found = self._tangents.get(id(value))
            if found is None and unconnected is UnconnectedGradients.ZERO:
                return constant(np.zeros(value.shape, value.dtype))
            return found
        return pack(primals, map(tangent_of, flatten(primals)))

    # the recorder protocol of thread_state.recording (adc/runtime/recording.py)

    def watching(self, args: tuple) -> tuple[int, ...]:
        """The positions of the arguments that have a tangent."""
        tangents = self._tangents
        return tuple(i for i, a in enumerate(args) if id(a) in tangents)

    def keep(self, kernel, args: tuple, tensors: list, results: tuple, saved=None) -> None:
        """Give the results of a call `watching` accepted their tangents."""
        moving = [self._tangents.get(id(a)) for a in args]
        if not isinstance(kernel, Kernel):
            raise TypeError(f"adc.ForwardAccumulator: cannot push tangents through @adc.custom_gradient "
                            f"'{kernel.name}': its backward is Python code, which forward mode cannot "
                            f"transpose; write it as a @custom_gradient kernel in the adc language")
        wanted = tuple(i for i, t in enumerate(moving) if t is not None)
        derivative = tangent_derivative(kernel, wanted)
        if not derivative.wrt:
            return
        position = thread_state.recording.index(self)
        del thread_state.recording[position]
        try:
            outs = iter(pushed(derivative, args, moving))
        finally:
            thread_state.recording.insert(position, self)
        for result, t in zip(results, kernel.signature.result_types):
            if t.dtype.is_float:
                self._watch(result, next(outs))

    def _watch(self, value, tangent: Tensor) -> None:
        self._tangents[id(value)] = tangent
        self._held.append(value)
        if isinstance(value, Variable):     # its value read as a Tensor moves too, until assigned
            self._watch(value.value(), tangent)

    @staticmethod
    def _tangent_for(primal, tangent, i: int) -> Tensor:
        if not isinstance(primal, (Tensor, Variable)):
            raise TypeError(f"adc.ForwardAccumulator: primals[{i}] must be a Tensor or Variable (the object "
                            f"the computation uses), got {type(primal).__name__}")
        if primal.dtype.kind != "f":
            raise TypeError(f"adc.ForwardAccumulator: primals[{i}] is {primal.dtype}; only float values have tangents")
        tangent = tangent.value() if isinstance(tangent, Variable) else tangent
        array = np.asarray(tangent.numpy() if isinstance(tangent, Tensor) else tangent)
        if array.shape != primal.shape:
            raise ValueError(f"adc.ForwardAccumulator: tangents[{i}] has shape {array.shape}, but its primal "
                             f"has shape {primal.shape}")
        if isinstance(tangent, Tensor) and array.dtype == primal.dtype:
            return tangent      # itself: a tape around the accumulator differentiates w.r.t. it (TF's double-backward)
        return constant(array.astype(primal.dtype, copy=False))

