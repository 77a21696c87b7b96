"""The backward walk over a tape's recorded calls: GradientTape.gradient and the Jacobians share it.

`walk` visits the recorded calls (recording.Node) that depend on a source, last first.
Each call's VJP maps its results' cotangents to its arguments'; cotangents reaching
the same tensor are summed with the eager `add`. The VJPs and sums are kernel calls,
so an enclosing tape records the walk itself: that is all higher orders need.

Two parameters are where the callers differ:
- `vjp(node, live)` -> (derivatives.Derivative, arguments, sizes): which VJP runs for a
  call, for its arguments on a path from a source (`node.wanted(live)`; `live` holds those
  values' ids), what its kernel takes before the cotangents (the primals, and any
  residuals), and the sizes of its dims when the forward call bound them (a split VJP's
  backward, run without checking its arguments again: Kernel.run_bound), else None.
  `walk_vjp()` (gradient, and the Jacobians' seed-at-a-time route) gives the call's
  split backward or its kernel's VJP; jacobians.py gives the batched VJP, which takes
  cotangents with a leading seed axis.
- `seed_count`: None when a cotangent has its value's shape; S when it is
  [S, *value.shape], a block of S seeds walked at once. The zeros standing in for a
  result no cotangent reached have that shape.

Invariant: a cotangent is kept only for a value on a path from a source (`live`),
and each call's VJP runs at most once per walk.

    recorded: y = mul(x, x);  z = add(y, x)      seeds: {z: 1}    sources: [x]
    walk:     add's VJP passes ct(z) on to y and x (no call);  mul_vjp(x, x, ct(y)) = 2x;
              ct(x) = add(1, 2x)
"""
from __future__ import annotations

from itertools import repeat
from operator import attrgetter, is_not
from typing import Callable, Sequence

import numpy as np

from adc.runtime.ops import add
from adc.runtime.recording import Node, thread_state
from adc.runtime.tensor import Tensor

_NONES = repeat(None)


def walk(nodes: Sequence, targets: Sequence, seeds: Sequence, sources: Sequence,
         vjp: Callable, seed_count: int | None = None) -> list:
    """The cotangents of `sources` (None: unconnected) given `seeds` for `targets`, walking
    `nodes` (in call order) backwards."""
    live = {id(s) for s in sources if s.numpy().dtype.kind == "f"}
    relevant = []
    for node in nodes:      # only calls that depend on a source matter
        if not live.isdisjoint(map(id, node.inputs)):
            relevant.append(node)
            live.update(map(id, node.outputs))
    cts: dict[int, Tensor] = {}
    for t, seed in zip(targets, seeds):
        if seed is not None:
            _accumulate(cts, live, id(t), seed)
    get = cts.get
    for node in reversed(relevant):
        outputs = node.outputs
        if len(outputs) == 1:       # the usual case, without building lists
            ct = get(id(outputs[0]))
            if ct is None:
                continue
            incoming, complete = (ct,), True
        else:
            incoming = list(map(get, map(id, outputs)))
            reached = sum(map(is_not, incoming, _NONES))    # (not `None in`: == is elementwise)
            if not reached:
                continue
            complete = reached == len(incoming)
        derivative, leading, sizes = vjp(node, live)
        if not derivative.wrt:
            continue
        if not complete:
            incoming = [ct if ct is not None else _zeros(r, seed_count) for ct, r in zip(incoming, outputs)]
        if not derivative.needs_call:
            outgoing = map(incoming.__getitem__, derivative.passthrough)
        elif sizes is not None and _shapes_match(incoming, outputs):
            outgoing = derivative.kernel.run_bound([*leading, *incoming], sizes)
        else:
            outgoing = derivative.kernel(*leading, *incoming)
            if type(outgoing) is not tuple:
                outgoing = (outgoing,)
        inputs = node.inputs
        for i, ct in zip(derivative.wrt, outgoing):
            key = id(inputs[i])     # (_accumulate, inlined: this loop is the walk's hot path)
            if key in live:
                cts[key] = add(cts[key], ct) if key in cts else ct
    return list(map(get, map(id, sources)))


def walk_vjp():
    """The VJP lookup (`walk`'s `vjp`) for a walk over recorded calls starting now: each
    call's split backward, on the values and residuals it saved, while no tape records the walk;
    else (an enclosing tape differentiates the walk again, which needs it) the kernel's whole VJP,
    on the primals (a Variable itself, so the enclosing tape connects the VJP call to it)."""
    return _kernel_vjp if thread_state.recording else _split_vjp


def _kernel_vjp(node: Node, live: set[int]):
    return node.kernel.derivative(node.wanted(live)), node.primals(), None


def _split_vjp(node: Node, live: set[int]):
    return node.saved if node.saved is not None else _kernel_vjp(node, live)


def _shapes_match(cts: Sequence[Tensor], values: Sequence[Tensor]) -> bool:
    """Each cotangent has its value's shape: a guard before native code reads them unchecked
    (Kernel.run_bound), though every cotangent a walk makes does (typed results, checked seeds)."""
    if len(cts) == 1:
        return cts[0].shape == values[0].shape
    return list(map(_shape, cts)) == list(map(_shape, values))


_shape = attrgetter("shape")


def _accumulate(cts: dict, live: set, key: int, ct: Tensor) -> None:
    """Add `ct` to the cotangent of the value `key` names, if it is on a path from a source."""
    if key in live:
        cts[key] = add(cts[key], ct) if key in cts else ct


def _zeros(result: Tensor, seed_count: int | None) -> Tensor:
    shape = result.shape if seed_count is None else (seed_count, *result.shape)
    return Tensor._wrap(np.zeros(shape, result.dtype))
