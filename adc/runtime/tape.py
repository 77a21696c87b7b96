"""adc.GradientTape: records kernel calls and differentiates through them (tf.GradientTape).

A tape is a recorder (adc/runtime/recording.py): every kernel call — a user kernel
or an eager op, they are the same thing — is offered to it while it records. It
keeps a call when it watches one of the arguments (a watched tensor or variable, or
a result of a call it kept); its results become watched in turn. `gradient()` walks
the kept calls backwards (adc/runtime/backward.py): each call's VJP kernel
(`Kernel.derivative()`) maps its results' cotangents to its arguments' (or, for a
call recorded by a lone tape, the backward half of its split VJP reads what its
forward half saved: see derivatives.split, and `backward.walk_vjp`). Those VJP
calls are kernel calls too, so an enclosing tape records them: nested tapes give
second and third derivatives with no special case. The Jacobians (jacobians.py)
take the recorded calls with `take_nodes` and run the same walk.

Invariant: the tape holds every object whose id() it uses as a key, so an id
never names two objects during the tape's life.

    x = adc.Variable(3.0)
    with adc.GradientTape() as t:        # records  mul(x, x) -> y
        y = x * x
    t.gradient(y, x)                     # mul_vjp(x, x, ones) -> 6.0
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from adc.runtime import jacobians
from adc.runtime.backward import walk, walk_vjp
from adc.runtime.nest import flatten, pack
from adc.runtime.recording import Node, Recorder, thread_state
from adc.runtime.tensor import Tensor, as_array, data_address
from adc.runtime.unconnected import UnconnectedGradients
from adc.runtime.variable import Variable

_TENSORS = frozenset((Tensor, Variable))
_REUSED = "A non-persistent GradientTape can only be used to compute one set of gradients (or jacobians)"


class GradientTape(Recorder):
    """Record operations for automatic differentiation (see the module docstring)."""

    takes_split_vjps = True

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        self._persistent = bool(persistent)
        self._watch_accessed_variables = bool(watch_accessed_variables)
        self._recording = False
        self._used = False
        self._nodes: list[Node] = []
        self._watched: dict[int, Any] = {}
        self._variables: dict[int, Variable] = {}

    def __enter__(self) -> "GradientTape":
        if self._recording:
            raise ValueError("Tape is still recording, This can happen if you try to re-enter an "
                             "already-active tape.")
        self._push()
        return self

    def __exit__(self, *exc) -> None:
        if self._recording:
            self._pop()

    def _push(self) -> None:
        thread_state.recording.append(self)
        self._recording = True

    def _pop(self) -> None:
        stack = thread_state.recording
        if stack and stack[-1] is self:     # the usual case: tapes exit in the order they entered
            stack.pop()
        elif self in stack:
            del stack[len(stack) - 1 - stack[::-1].index(self)]
        else:
            raise RuntimeError("a GradientTape must be exited in the thread that entered it")
        self._recording = False

    def watch(self, tensor) -> None:
        """Ensure `tensor` (a tensor, a variable, or a nested structure of them) is traced."""
        for t in flatten(tensor):
            if not isinstance(t, (Tensor, Variable)):
                raise ValueError(f"Passed in object {t!r} of type {type(t).__name__!r}, "
                                 "not adc.Tensor or adc.Variable.")
            if t.dtype.kind != "f":
                warnings.warn(f"The dtype of the watched tensor must be floating (e.g. float32), "
                              f"got {t.dtype}", stacklevel=2)
            self._watch(t)

    def _watch(self, t) -> None:
        self._watched[id(t)] = t
        if type(t) is Variable:
            self._variables.setdefault(id(t), t)

    def watched_variables(self) -> tuple[Variable, ...]:
        """The variables watched so far, explicitly or by access, in order of first watch."""
        return tuple(self._variables.values())

    def stop_recording(self) -> "_Paused":
        """A context manager inside which this tape records nothing."""
        if not self._recording:
            raise RuntimeError("Trying to stop recording a tape which is not recording.")
        return _Paused(self)

    def reset(self) -> None:
        """Forget everything recorded and watched so far (recording goes on if it was on)."""
        self._nodes, self._watched, self._variables, self._used = [], {}, {}, False

    def watching(self, args: tuple) -> tuple[int, ...]:
        """The indices of the `args` of a call that this tape watches: a kernel asks before running,
        and `keep`s the call only if there is one. Reading a trainable Variable watches it, when the
        tape watches accessed variables."""
        watched = self._watched
        if not self._watch_accessed_variables:
            return tuple([i for i, a in enumerate(args) if id(a) in watched])
        wanted = []
        for i, a in enumerate(args):
            if id(a) in watched:
                wanted.append(i)
            elif type(a) is Variable and a.trainable:
                self._watch(a)
                wanted.append(i)
        return tuple(wanted)

    def keep(self, kernel, args: tuple, tensors: list[Tensor], results: tuple[Tensor, ...], saved=None) -> None:
        """Record a call that `watching(args)` accepted, its arguments `recordable`: its results are
        watched from now on. `saved` (for a single tape) is the call's split backward
        (derivatives.split) and the arguments it takes before the cotangents: the call's values,
        then the residuals its forward half returned."""
        self._nodes.append(Node(kernel, args, tensors, results, saved))
        watched = self._watched
        for result in results:
            watched[id(result)] = result

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=UnconnectedGradients.NONE):
        """d sum(target) / d sources, with the structure of `sources` (None or zeros where the
        target does not depend on a source); `output_gradients` replaces the implicit ones."""
        if self._used:
            raise RuntimeError(_REUSED)
        unconnected = UnconnectedGradients.of(unconnected_gradients, "GradientTape.gradient")
        if self._recording and not self._persistent:
            self._pop()
        targets = _tensors(target, "target")
        flat_sources = _tensors(sources, "sources")
        seeds = _seeds(target, targets, output_gradients)
        nodes = self.take_nodes(targets, "gradient", stacklevel=2)
        for s in flat_sources:
            if s.numpy().dtype.kind != "f":
                warnings.warn(f"The dtype of the source tensor must be floating (e.g. float32) when "
                              f"calling GradientTape.gradient, got {s.dtype}", stacklevel=2)
        grads = walk(nodes, targets, seeds, flat_sources, walk_vjp())
        if unconnected is UnconnectedGradients.ZERO:
            grads = [g if g is not None else Tensor._wrap(np.zeros(s.shape, s.dtype))
                     for g, s in zip(grads, flat_sources)]
        return grads if flat_sources is sources else pack(sources, iter(grads))

    def take_nodes(self, targets: list, what: str, stacklevel: int = 2) -> list[Node]:
        """The recorded calls, in call order, for a backward walk from `targets` by `what`
        ("gradient", "jacobian"...). A non-persistent tape stops recording and gives them once
        (RuntimeError after). Warns, `stacklevel` frames above the caller as warnings.warn counts,
        when a float target is unknown to the tape."""
        if self._used:
            raise RuntimeError(_REUSED)
        if self._recording and not self._persistent:
            self._pop()
        _warn_unrecorded(self, targets, what, stacklevel + 2)
        nodes = self._nodes
        if self._persistent:
            return list(nodes)
        self._used = True
        self._nodes, self._watched = [], {}
        return nodes

    def jacobian(self, target, sources, unconnected_gradients=UnconnectedGradients.NONE,
                 parallel_iterations=None, experimental_use_pfor=True, mode="auto", memory_limit_mb=None,
                 sparse=False):
        """d target / d source for each source, shaped target.shape + source.shape, with the
        structure of `sources`; seeds walked in blocks (adc/runtime/jacobians.py): backward, or
        forward when `mode` is "forward", or "auto" and the source is smaller than the target. A
        block's seeds take at most `memory_limit_mb` MiB (default ADC_JACOBIAN_MEMORY_MB, else 256)
        or the result's size. `sparse`: a scipy.sparse CSR matrix (target size × source size) per
        source, from the recorded kernels' sparsity patterns and colored seeds."""
        return jacobians.jacobian(self, target, sources, unconnected_gradients, parallel_iterations,
                                  experimental_use_pfor, mode, memory_limit_mb, sparse)

    def batch_jacobian(self, target, source, unconnected_gradients=UnconnectedGradients.NONE,
                       parallel_iterations=None, experimental_use_pfor=True, allow_cross_example=False,
                       mode="auto", memory_limit_mb=None):
        """The per-example Jacobians [b, y1..yn, x1..xm] of target[i] w.r.t. source[i]; raises
        ValueError when the recorded calls mix examples, unless `allow_cross_example`; `mode` and
        `memory_limit_mb` as for `jacobian`, by the per-example sizes."""
        return jacobians.batch_jacobian(self, target, source, unconnected_gradients, parallel_iterations,
                              experimental_use_pfor, allow_cross_example, mode, memory_limit_mb)


def _warn_unrecorded(tape: GradientTape, targets: list, what: str, stacklevel: int) -> None:
    """Warn when a float target is unknown to `tape` (neither watched nor a recorded result). Nothing
    flows back from it, as in TensorFlow, but the usual cause is a target computed after the tape's
    `with` block ended (`t2.gradient(reduce_sum(g), x)` outside it), which deserves a word."""
    watched = tape._watched
    if all(map(watched.__contains__, map(id, targets))):    # the usual case
        return
    unknown = len([t for t in targets if id(t) not in watched and t.dtype.kind == "f"])
    if unknown:
        which = "the target was" if len(targets) == 1 else f"{unknown} of the {len(targets)} targets were"
        warnings.warn(f"GradientTape.{what}: {which} not recorded by this tape (computed after its `with` "
                      f"block ended, or from nothing it watches), so no gradient flows back from it",
                      stacklevel=stacklevel)


class _Paused:
    """GradientTape.stop_recording(): the tape leaves the recording stack, then comes back."""

    def __init__(self, tape: GradientTape):
        self._tape = tape

    def __enter__(self) -> None:
        self._tape._pop()

    def __exit__(self, *exc) -> None:
        self._tape._push()


def _tensors(structure, what: str) -> list:
    if type(structure) in _TENSORS:
        return [structure]
    if type(structure) is list and _TENSORS.issuperset(map(type, structure)):     # the usual sources
        return structure
    flat = flatten(structure)
    if _TENSORS.issuperset(map(type, flat)):
        return flat
    for t in flat:
        if not isinstance(t, (Tensor, Variable)):
            raise TypeError(f"GradientTape.gradient: the {what} must be adc.Tensor or adc.Variable "
                            f"objects (or nested lists, tuples or dicts of them), got {type(t).__name__} "
                            f"{t!r}")
    return flat


def _seeds(target, targets: list, output_gradients) -> list:
    """ones_like(target) for each target, or the given output gradients in the targets' dtypes
    (one value for a single target, a structure like the target's otherwise)."""
    if output_gradients is None:
        return [_ones_like(t) for t in targets]
    given = flatten(output_gradients) if isinstance(target, (list, tuple, dict)) else [output_gradients]
    if len(given) != len(targets):
        raise ValueError(f"GradientTape.gradient: {len(targets)} targets but {len(given)} output_gradients")
    seeds = []
    for t, g in zip(targets, given):
        seed = g if g is None or isinstance(g, Tensor) and g.dtype == t.dtype else Tensor(as_array(g, t.dtype))
        if seed is not None and seed.shape != t.shape:
            raise ValueError(f"GradientTape.gradient: an output gradient of shape {seed.shape} "
                             f"for a target of shape {t.shape}")
        seeds.append(seed)
    return seeds


def _ones_like(t) -> Tensor:
    """The seed ones: a Tensor never changes, so a small one is made once per shape and dtype."""
    like = t.numpy()
    key = (like.shape, like.dtype)
    ones = _SMALL_ONES.get(key)
    if ones is None:
        array = np.empty(like.shape, like.dtype)
        array.fill(1)       # (np.ones costs several times more for a scalar)
        ones = Tensor._wrap(array, data_address(array))
        if like.size <= _SMALL and len(_SMALL_ONES) < _SMALL_SHAPES:
            _SMALL_ONES[key] = ones
    return ones


_SMALL, _SMALL_SHAPES = 64, 1024      # seeds kept: of at most 64 elements, of 1024 shapes at most
_SMALL_ONES: dict = {}
