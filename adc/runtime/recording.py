"""The recording protocol: how a kernel call reaches the tapes, accumulators and watchers around it.

Every kernel call with a float result — a user kernel or an eager op, they are the
same thing — is offered, once it has run, to the recorders of its thread
(`thread_state.recording`, innermost last): a `GradientTape`, a `ForwardAccumulator`,
the watcher of variables that `adc.custom_gradient` runs its function under. Each
says which arguments it follows (`watching`); one that follows any `keep`s the call.
A tape keeps it as a `Node`, which its backward walk reads later.

This module sits under `Kernel` (kernel.py calls `record`) and knows nothing of
derivatives: the differentiation API (tape.py, backward.py, jacobians.py) sits above
the kernels and the eager ops it calls.

Invariant: a recorder that keys on id() holds the object, so an id never names two
objects while it records.

    with adc.GradientTape() as t:   # thread_state.recording == [t]
        y = x * x                   # record(mul, (x, x), ...): t.watching((x, x)) == (0, 1), t.keep(...)
"""
from __future__ import annotations

import threading

from adc.runtime.tensor import Tensor
from adc.runtime.variable import Variable

_TENSORS = frozenset((Tensor, Variable))


class Recorder:
    """What `thread_state.recording` holds. A kernel asks `watching(args)` of each recorder after
    a call, and hands the call to `keep` when it names an argument."""

    # True for a recorder that, alone in its thread, takes a call with its split VJP: the kernel
    # asks `watching` before the call, runs the forward half of the split instead of itself, and
    # passes the backward half and what it reads as `keep`'s `saved` (a GradientTape).
    takes_split_vjps = False

    def watching(self, args: tuple) -> tuple[int, ...]:
        """The indices of the `args` of a call that this recorder follows (none: it keeps nothing)."""
        raise NotImplementedError

    def keep(self, kernel, args: tuple, tensors: list[Tensor], results: tuple[Tensor, ...], saved=None) -> None:
        """Take a call that `watching(args)` accepted, its arguments `recordable`."""
        raise NotImplementedError


class _ThreadState(threading.local):
    def __init__(self):
        self.recording: list[Recorder] = []


thread_state = _ThreadState()


def record(kernel, args: tuple, tensors: list[Tensor], results: tuple[Tensor, ...]) -> None:
    """Offer a finished call to every recorder in this thread: each keeps it when `watching(args)`
    names an argument it follows."""
    for recorder in thread_state.recording:
        if recorder.watching(args):
            recorder.keep(kernel, *recordable(args, tensors), results)


def recordable(args: tuple, tensors: list[Tensor]) -> tuple[tuple, list[Tensor]]:
    """A call's arguments and their tensors as a recorder keeps them: a value that is neither a
    Tensor nor a Variable (a NumPy array its owner may change afterwards, a Python number) becomes a copy."""
    if _TENSORS.issuperset(map(type, args)):
        return args, tensors
    args = tuple([a if type(a) in _TENSORS else Tensor(t._array) for a, t in zip(args, tensors)])
    return args, [a if type(a) is Tensor else t for a, t in zip(args, tensors)]


class Node:
    """One recorded call: the kernel, its arguments (Tensors and Variables, see `recordable`) and
    their values then, its results, and (for a call a lone tape kept) its split backward and what
    that reads (`saved`). A backward walk connects calls by the id()s of arguments and results
    (`keys`, `output_keys`); the node holds them, so an id names one object meanwhile."""

    __slots__ = ("kernel", "inputs", "values", "outputs", "saved")

    def __init__(self, kernel, args: tuple, tensors: list[Tensor], outputs: tuple[Tensor, ...], saved=None):
        self.kernel = kernel
        self.inputs, self.values = args, tensors
        self.outputs = outputs
        self.saved = saved

    @property
    def keys(self) -> list[int]:
        return list(map(id, self.inputs))

    @property
    def output_keys(self) -> list[int]:
        return list(map(id, self.outputs))

    def wanted(self, live: set[int]) -> tuple[int, ...]:
        """The indices of the arguments whose ids are in `live`: those a backward walk wants."""
        return tuple([i for i, a in enumerate(self.inputs) if id(a) in live])

    def primals(self) -> list:
        """The arguments for the VJP call: a Variable itself while it still holds the value it had,
        so an enclosing tape connects the VJP call to it."""
        return [a if a is v or a._value is v else v for a, v in zip(self.inputs, self.values)]
