"""adc.custom_gradient: a Python function with its own backward, one node on the tape (tf.custom_gradient).

    @adc.custom_gradient
    def clip_gradients(y):
        def backward(dy):
            return adc.clip_by_norm(dy, 0.5)
        return y, backward

`f(*args)` returns `(result, backward)`. The wrapper runs `f` as ordinary eager
code, gives each tensor of the result a fresh Tensor (so nothing but this call
produced it), and offers ONE call to the recording tapes: inputs `args` (plus the
Variables `f` read, see below), outputs the fresh result. A tape watching an input
keeps it; `gradient()` then asks it for its derivative like a kernel's
(`derivatives.Derivative`), whose "kernel" calls `backward(*result cotangents)`
and checks it returns one cotangent per input (a single one for one input; None
means zero).

Invariant: the ops inside `f` never lie on the path from the result back to the
inputs. They are still recorded, as in TensorFlow eager: the values `backward`
closes over (an `exp(x)` cached for it) stay connected to the inputs on an
enclosing tape, and since `backward` runs eager ops while that tape records, the
gradient of a gradient through a custom gradient is right.

Variables: trainable Variables that `f` reads without receiving them as arguments
are inputs too; `backward` must then accept `variables=` (the list, in order of
first read) and return `(input_cotangents, variable_cotangents)` — as in TF.
Keyword arguments of `f` are passed through and not differentiated.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from adc.runtime.derivatives import Derivative
from adc.runtime.nest import flatten, pack
from adc.runtime.ops import convert_to_tensor
from adc.runtime.recording import Recorder, record, thread_state
from adc.runtime.tensor import Tensor
from adc.runtime.variable import Variable


def custom_gradient(f):
    """Decorate `f(*args) -> (result, backward)` so tapes differentiate it with `backward`."""

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        watcher = _VariableWatcher()
        thread_state.recording.append(watcher)
        try:
            returned = f(*args, **kwargs)
        finally:
            thread_state.recording.remove(watcher)
        if not (isinstance(returned, tuple) and len(returned) == 2 and callable(returned[1])):
            raise TypeError(f"@adc.custom_gradient {f.__name__} must return (result, backward) with a callable "
                            f"backward, got {type(returned).__name__}")
        result, backward = returned
        variables = [v for v in watcher.variables.values() if all(v is not a for a in args)]
        if variables and not _accepts_variables(backward):
            raise TypeError(f"@adc.custom_gradient {f.__name__}: the backward function must accept a "
                            f"keyword argument 'variables', since the function uses variables: "
                            f"{', '.join(v.name for v in variables)}")
        outputs = [_fresh(t) for t in flatten(result)]
        if thread_state.recording:
            inputs = [*args, *variables]
            tensors = [convert_to_tensor(a) for a in inputs]
            call = CustomGradientCall(f.__name__, backward, tensors, len(args), variables)
            record(call, tuple(inputs), tensors, tuple(outputs))
        return pack(result, iter(outputs))

    return wrapper


class CustomGradientCall:
    """One call of a custom-gradient function as the tape sees it: `derivative()` as a
    Kernel's, whose kernel takes (primal inputs, result cotangents) and calls `backward`."""

    def __init__(self, name: str, backward, inputs: list[Tensor], n_args: int, variables: list[Variable]):
        self.name = name
        self._backward = backward
        self._inputs = inputs
        self._n_args = n_args
        self._variables = variables
        wrt = tuple(i for i, t in enumerate(inputs) if t.dtype.kind == "f")
        self._derivative = Derivative(self._vjp, wrt, (None,) * len(wrt))

    def derivative(self, wanted: tuple[int, ...] | None = None) -> Derivative:
        """The backward for all float inputs (a tape asking for fewer ignores the rest)."""
        return self._derivative

    def _vjp(self, *primals_and_cts) -> tuple[Tensor, ...]:
        cts = primals_and_cts[len(self._inputs):]
        if self._variables:
            grads, variable_grads = self._backward(*cts, variables=self._variables)
            grads = [*self._listed(grads, self._n_args, "gradients"),
                     *self._listed(variable_grads, len(self._variables), "variable gradients")]
        else:
            grads = self._listed(self._backward(*cts), self._n_args, "gradients")
        return tuple(self._cotangent(grads[i], i) for i in self._derivative.wrt)

    def _listed(self, grads, n: int, what: str) -> list:
        """The backward's cotangents as a list of `n` (a single value stands for a list of one)."""
        if n == 1 and not isinstance(grads, (list, tuple)):
            grads = [grads]
        if not isinstance(grads, (list, tuple)) or len(grads) != n:
            got = len(grads) if isinstance(grads, (list, tuple)) else 1
            raise ValueError(f"@adc.custom_gradient {self.name}: the backward function must return "
                             f"{n} {what}, one per input, but returned {got}")
        return list(grads)

    def _cotangent(self, grad, i: int) -> Tensor:
        """Input i's cotangent: the given one in the input's dtype (zeros for None), shape checked."""
        primal = self._inputs[i]
        if grad is None:
            return Tensor._wrap(np.zeros(primal.shape, primal.dtype))
        grad = convert_to_tensor(grad, primal.dtype)
        if grad.shape != primal.shape:
            raise ValueError(f"@adc.custom_gradient {self.name}: the backward function returned a "
                             f"gradient of shape {grad.shape} for input {i} of shape {primal.shape}")
        return grad


class _VariableWatcher(Recorder):
    """Sits on the recording stack while `f` runs and notes the trainable Variables it reads."""

    def __init__(self):
        self.variables: dict[int, Variable] = {}

    def watching(self, args: tuple) -> tuple[int, ...]:
        """Nothing, once the trainable Variables among `args` are noted: the calls `f` makes are
        never differentiated (its backward is the gradient)."""
        for a in args:
            if type(a) is Variable and a.trainable:
                self.variables.setdefault(id(a), a)
        return ()


def _accepts_variables(backward) -> bool:
    params = inspect.signature(backward).parameters.values()
    return any(p.name == "variables" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _fresh(value) -> Tensor:
    """A new Tensor object with the value's data: the result's only producer is the custom call."""
    tensor = convert_to_tensor(value)
    return Tensor._wrap(tensor._array, tensor._ptr)
