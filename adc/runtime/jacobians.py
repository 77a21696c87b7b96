"""tape.jacobian and tape.batch_jacobian (tf.GradientTape's): every seed in one backward walk.

A Jacobian is the VJP applied to one-hot seeds. Instead of one walk per seed,
the backward walk (adc/runtime/backward.py) runs once for a whole block of seeds: the cotangents carry a leading
seed axis S, and each recorded call's *batched* VJP kernel — the batching pass
applied to its VJP (`vjp_batched`, adc/passes/jacobian.py), compiled once per
(kernel, wanted params) — maps every seed's cotangents in one call:

    eager_sigmoid(x: f32[D0]) -> f32[D0]
      ==> batched VJP (x: f32[D0], ct: f32[S, D0]) -> f32[S, D0]

- `jacobian`: seeds = the identity of target.size, shaped [S, *target.shape];
  the source's rows [S, *source.shape] are reshaped to target.shape + source.shape.
  Forward mode (`mode`) seeds the source instead: S = source.size, whatever the target's size.
- Seeds go in blocks (`_block_size`) whose seed-axis values fit the memory budget
  (`memory_limit_mb`, else ADC_JACOBIAN_MEMORY_MB, else 256 MiB) or the result, whichever is larger.
- `batch_jacobian`: seed j is one-hot at [:, j] for every example at once, so S
  is the per-example target size; rows [S, b, *x] become [b, *y, *x]. Before the
  walk, every recorded call on the path is checked: a call whose result mixes
  examples (batch normalization) makes the result a sum over cross-example
  blocks, which is an error unless `allow_cross_example=True` (then a warning).
- A batch Jacobian whose path is one kernel call (the source one of its params, the target
  its result, sharing the leading axis in its types) is that kernel's compiled
  `adc.batch_jacobian`: fused, its seeds folded into the first matmul, no walk.
- `experimental_use_pfor=False` walks once per seed with the ordinary VJPs (the
  reference route, also taken when a recorded call has a Python backward, from
  adc.custom_gradient); `parallel_iterations` bounds the seeds per walk (memory).

Every step (the walk, joining the blocks, the final reshape) is a kernel call, so
an enclosing tape records it: the jacobian of a gradient is a Hessian.

Invariant: a cotangent in the walk has shape [S, *value.shape] for the block's S.
"""
from __future__ import annotations

import math
import numbers
import os
import warnings

import numpy as np

from adc.runtime.backward import walk, walk_vjp
from adc.runtime.derivatives import Derivative, batched_derivative, batched_tangents
from adc.runtime import functional
from adc.runtime.kernel import Kernel
from adc.runtime.nest import flatten, pack
from adc.runtime.ops import concat, reshape, transpose
from adc.runtime.recording import Node
from adc.passes.sparsity import Pattern, union
from adc.runtime.sparse_derivatives import as_matrix, decompressed, kernel_patterns, plan
from adc.runtime.tensor import Tensor
from adc.runtime.unconnected import UnconnectedGradients
from adc.runtime.variable import Variable

DEFAULT_MEMORY_MB = 256    # what a Jacobian's blocks of seeds may take at once, unless told otherwise
_JOIN_ARITY = 8     # blocks joined per concat call: few concat kernels to compile, whatever S is


def jacobian(tape, target, sources, unconnected_gradients=UnconnectedGradients.NONE,
             parallel_iterations=None, experimental_use_pfor=True, mode="auto", memory_limit_mb=None,
             sparse=False):
    """d target[i...] / d source[j...] for each source: shape target.shape + source.shape; with
    `sparse`, a scipy.sparse CSR matrix (target size × source size) per source."""
    target, flat, unconnected, chunk = _arguments("jacobian", target, sources, unconnected_gradients,
                                                  parallel_iterations,
                                                  experimental_use_pfor=experimental_use_pfor, sparse=sparse)
    mode = _mode("jacobian", mode)
    budget = memory_budget(memory_limit_mb, "GradientTape.jacobian")
    nodes = tape.take_nodes([target], "jacobian", stacklevel=3)
    if sparse:
        return pack(sources, iter([_sparse(nodes, target, source, mode) for source in flat]))
    pushed = [s for s in flat if _forward(mode, nodes, s.size, target.size, experimental_use_pfor)]
    pulled = [s for s in flat if all(s is not p for p in pushed)]
    found = dict(zip(map(id, pulled), _rows(nodes, target, pulled, 1, chunk, budget, experimental_use_pfor)))
    found.update((id(s), None if c is None else _seed_axis_last(c))         # [S, *target] -> [*target, S]
                 for s, c in zip(pushed, _columns(nodes, target, pushed, 1, chunk, budget)))
    results = []
    for source in flat:
        shape, found_one = target.shape + source.shape, found[id(source)]
        results.append(_unconnected(unconnected, shape, source) if found_one is None else _reshape(found_one, shape))
    return pack(sources, iter(results))


def batch_jacobian(tape, target, source, unconnected_gradients=UnconnectedGradients.NONE,
                   parallel_iterations=None, experimental_use_pfor=True, allow_cross_example=False,
                   mode="auto", memory_limit_mb=None):
    """d target[b, i...] / d source[b, j...] per example b: shape [b, *target.shape[1:], *source.shape[1:]]."""
    target, (source,), unconnected, chunk = _arguments("batch_jacobian", target, [source],
                                                       unconnected_gradients, parallel_iterations,
                                                       experimental_use_pfor=experimental_use_pfor,
                                                       allow_cross_example=allow_cross_example)
    if target.ndim < 2 or source.ndim < 2:
        raise ValueError(f"batch_jacobian: target and source need rank >= 2 (a batch axis and at least one "
                         f"more), got target shape {target.shape} and source shape {source.shape}")
    if target.shape[0] != source.shape[0]:
        raise ValueError(f"batch_jacobian: the first dimension of target shape {target.shape} and source "
                         f"shape {source.shape} must match")
    mode = _mode("batch_jacobian", mode)
    budget = memory_budget(memory_limit_mb, "GradientTape.batch_jacobian")
    nodes = tape.take_nodes([target], "batch_jacobian", stacklevel=3)
    path = _path(nodes, target, source)
    _check_examples(path, target, source, allow_cross_example)
    shape = target.shape + source.shape[1:]
    examples = target.shape[0]
    if allow_cross_example and mode == "forward":
        raise ValueError("GradientTape.batch_jacobian: allow_cross_example=True gives TensorFlow's sums "
                         "over the target's examples, which only reverse mode computes; use mode='reverse'")
    forward = not allow_cross_example and _forward(mode, nodes, source.size // max(examples, 1),
                                                   target.size // max(examples, 1), experimental_use_pfor)
    call = _one_call(path, target, source) if experimental_use_pfor and not allow_cross_example else None
    seeds = (source if forward else target).size // max(examples, 1)
    if call is not None and _block_size(path, source if forward else target, seeds, chunk, budget, math.prod(shape),
                                        () if forward else (source,)) >= seeds:
        node, param = call      # all its seeds fit in one block: the fused kernel holds no more than the walk
        return functional.batch_jacobian(node.kernel, param, "forward" if forward else "reverse")(*node.primals())
    if forward:
        (column,) = _columns(nodes, target, [source], examples, chunk, budget)
        return _unconnected(unconnected, shape, source) if column is None else \
            _reshape(_seed_axis_last(column), shape)                       # [S, b, *y] -> [b, *y, S]
    (row,) = _rows(nodes, target, [source], examples, chunk, budget, experimental_use_pfor)
    if row is None:
        return _unconnected(unconnected, shape, source)
    return _reshape(transpose(row, (1, 0, *range(2, row.ndim))), shape)     # [S, b, *x] -> [b, S, *x]


MODES = ("auto", "forward", "reverse")


def _mode(what: str, mode) -> str:
    if mode not in MODES:
        raise ValueError(f"GradientTape.{what}: mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}")
    return mode


def _forward(mode: str, nodes, source_size: int, target_size: int, use_pfor: bool) -> bool:
    """The mode rule: forward mode (a seed per source element) when the source has fewer elements
    per example than the target, and every recorded call is a kernel (a Python backward has no JVP)."""
    if mode == "reverse" or (mode == "auto" and not (use_pfor and source_size < target_size)):
        return False
    if not all(isinstance(n.kernel, Kernel) for n in nodes):
        if mode == "forward":
            raise TypeError("forward mode cannot run through an @adc.custom_gradient call (its backward is "
                            "Python code); use mode='reverse'")
        return False
    return True


def memory_budget(memory_limit_mb, what: str) -> int:
    """The bytes a Jacobian's seeds may take at once: `memory_limit_mb` MiB, else ADC_JACOBIAN_MEMORY_MB
    (read at every call), else DEFAULT_MEMORY_MB; ValueError naming the setting otherwise."""
    name, limit = "memory_limit_mb", memory_limit_mb
    if memory_limit_mb is None:
        name, setting = "ADC_JACOBIAN_MEMORY_MB", os.environ.get("ADC_JACOBIAN_MEMORY_MB", "").strip()
        if not setting:
            return DEFAULT_MEMORY_MB << 20
        try:
            limit = float(setting)
        except ValueError:
            raise ValueError(f"{what}: ADC_JACOBIAN_MEMORY_MB must be a positive number of MiB, "
                             f"not {setting!r}") from None
    elif not isinstance(memory_limit_mb, numbers.Real) or isinstance(memory_limit_mb, bool):
        raise TypeError(f"{what}: memory_limit_mb must be a number of MiB or None, got {memory_limit_mb!r}")
    if not 0 < limit < math.inf:
        raise ValueError(f"{what}: {name} must be a positive number of MiB, got {limit!r}")
    return max(1, int(limit * (1 << 20)))


def _block_size(path: list[Node], seeded, total: int, chunk, budget: int, result: int, pulled=()) -> int:
    """How many of `total` seeds one block pushes or pulls (at least 1): `parallel_iterations`
    (`chunk`) at most, and no more than keep the block's seed-axis values within the larger of
    `budget` bytes and the result (`result` elements). Every seed of a block carries one copy of
    each value on the path (the seeds `seeded`, the results of the calls on `path` and the
    cotangents of the sources `pulled`: the walks keep them all to the end of the block), and the
    kernels computing them about as much again."""
    carried = [seeded, *pulled, *(out for node in path for out in node.outputs if out.dtype.kind == "f")]
    per_seed = 2 * sum(v.size * v.dtype.itemsize for v in carried)
    itemsize = max(v.dtype.itemsize for v in carried)
    fits = max(budget, result * itemsize) // max(per_seed, 1)
    return max(1, min(total, chunk or total, fits))


def _seed_axis_last(t):
    return transpose(t, (*range(1, t.ndim), 0)) if t.ndim > 1 else t


def _columns(nodes, target, sources, examples: int, chunk, budget: int) -> list:
    """Per source, the target's tangents for all its seeds stacked as [S, *target.shape] (None:
    unconnected): the recorded calls pushed forward with their batched JVPs, S = the source's
    (per-example) size, in blocks of seeds the memory budget holds; `examples` > 1 gives
    batch_jacobian's per-example seeds."""
    columns = []
    for source in sources:
        total = source.size // examples if examples else 0
        step = _block_size(_path(nodes, target, source), source, total, chunk, budget, target.size * total)
        blocks = [_push(nodes, target, source, _one_hot_seeds(source, examples, lo, min(lo + step, total)))
                  for lo in range(0, max(total, 1), step)]
        columns.append(_join(blocks))
    return columns


def _push(nodes, target, source, seeds: Tensor):
    """The target's tangents for a block of `seeds` [S, *source.shape]: each recorded call with a
    moving argument runs its tangents-only JVP batched over the seed axis."""
    tangents = {id(source): seeds}
    for node in nodes:
        moving = [tangents.get(id(a)) for a in node.inputs]
        wanted = tuple(i for i, t in enumerate(moving) if t is not None)
        if not wanted:
            continue
        derivative = batched_tangents(node.kernel, wanted)
        if not derivative.wrt:
            continue
        outs = iter(functional.pushed(derivative, node.primals(), moving))
        for result, t in zip(node.outputs, node.kernel.signature.result_types):
            if t.dtype.is_float:
                tangents[id(result)] = next(outs)
    return tangents.get(id(target))


def _arguments(what: str, target, sources, unconnected_gradients, parallel_iterations, **flags):
    """The arguments checked (ValueError/TypeError naming the parameter) and normalized."""
    if not isinstance(target, (Tensor, Variable)):
        raise TypeError(f"GradientTape.{what}: the target must be one adc.Tensor or adc.Variable, "
                        f"got {type(target).__name__}")
    flat = flatten(sources)
    for s in flat:
        if not isinstance(s, (Tensor, Variable)):
            raise TypeError(f"GradientTape.{what}: the sources must be adc.Tensor or adc.Variable objects "
                            f"(or nested lists, tuples or dicts of them), got {type(s).__name__} {s!r}")
    if parallel_iterations is not None and not (isinstance(parallel_iterations, numbers.Integral)
                                                and not isinstance(parallel_iterations, bool)
                                                and parallel_iterations >= 1):
        raise ValueError(f"GradientTape.{what}: parallel_iterations must be a positive int or None, "
                         f"got {parallel_iterations!r}")
    for name, flag in flags.items():
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"GradientTape.{what}: {name} must be True or False, got {flag!r}")
    return (target, flat, UnconnectedGradients.of(unconnected_gradients, f"GradientTape.{what}"),
            None if parallel_iterations is None else int(parallel_iterations))


def _unconnected(unconnected: UnconnectedGradients, shape: tuple, source):
    if unconnected is UnconnectedGradients.ZERO:
        return Tensor._wrap(np.zeros(shape, source.dtype))
    return None


def _rows(nodes, target, sources, examples: int, chunk, budget: int, use_pfor: bool) -> list:
    """Per source, the cotangents of all seeds stacked as [S, *source.shape] (None: unconnected),
    walked in blocks of seeds the memory budget holds; `examples` > 1 gives batch_jacobian's
    per-example seeds."""
    if not sources:     # every source pushed forward: no seed of the target's size to build
        return []
    total = math.prod(target.shape) // examples if examples else 0
    if total == 0:      # no seed: nothing to walk, but an unconnected source stays unconnected
        return [Tensor._wrap(np.zeros((0, *s.shape), s.dtype)) if s is target or _path(nodes, target, s)
                else None for s in sources]
    batched = use_pfor and all(isinstance(n.kernel, Kernel) for n in nodes)   # not a Python backward
    walk = _walk if batched else _walk_one
    path = {id(n): n for s in sources for n in _path(nodes, target, s)}.values()
    result = sum(s.size for s in sources) * total
    step = _block_size(list(path), target, total, chunk, budget, result, sources) if batched else 1
    blocks = [walk(nodes, target, _one_hot_seeds(target, examples, lo, min(lo + step, total)), sources)
              for lo in range(0, total, step)]
    return [_join([b[i] for b in blocks]) for i in range(len(sources))]


def _one_hot_seeds(target, examples: int, lo: int, hi: int) -> Tensor:
    """Seeds lo..hi-1 as [hi - lo, *target.shape]: seed k is 1 at flat per-example position k of
    every example (`examples` = 1: of the whole target)."""
    rows = np.zeros((hi - lo, examples, math.prod(target.shape) // examples), target.dtype)
    rows[np.arange(hi - lo), :, np.arange(lo, hi)] = 1
    return Tensor._wrap(rows.reshape((hi - lo, *target.shape)))


def _walk_one(nodes, target, seeds: Tensor, sources) -> list:
    """The reference route: the ordinary backward walk for the block's one seed."""
    grads = walk(nodes, [target], [Tensor._wrap(seeds.numpy()[0].copy())], sources, walk_vjp())
    return [_reshape(g, (1, *g.shape)) if g is not None else None for g in grads]


def _walk(nodes, target, seeds: Tensor, sources) -> list:
    """Cotangents [S, *source.shape] of `sources` for the block of `seeds` [S, *target.shape]:
    the backward walk with one batched VJP call per recorded call."""
    return walk(nodes, [target], [seeds], sources, batched_vjp, seeds.shape[0])


def _join(blocks: list):
    """The blocks [s, ...] concatenated on the seed axis; None when the source is unconnected
    (connection does not depend on the seed, so one block tells)."""
    if blocks[0] is None:
        return None
    parts = blocks
    while len(parts) > 1:
        parts = [concat(parts[i:i + _JOIN_ARITY], 0) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), _JOIN_ARITY)]
    return parts[0]


def _reshape(t, shape: tuple):
    return t if t.shape == shape else reshape(t, shape)


def batched_vjp(node: Node, live: set[int]) -> tuple[Derivative, list, None]:
    """The batched VJP a walk with a seed axis runs for a recorded call, on its primals."""
    return batched_derivative(node.kernel, node.wanted(live)), node.primals(), None


def _sparse(nodes, target, source, mode: str):
    """d target / d source as a scipy.sparse CSR matrix: the patterns of the calls on the path
    composed, colored, and its seeds pushed forward (`_push`) or pulled back (`_walk`) in one
    block (adc/runtime/sparse_derivatives.py)."""
    path = _path(nodes, target, source)
    if not all(isinstance(n.kernel, Kernel) for n in path):
        raise TypeError("GradientTape.jacobian(sparse=True): every call between the source and the target must "
                        "be a compiled kernel (an @adc.custom_gradient's backward is Python code, with no pattern)")
    pattern = _path_pattern(path, target, source)
    the_plan = plan(pattern, mode, False, (source.shape, source.dtype), (target.shape, target.dtype))
    if the_plan.forward:
        compressed = _push(nodes, target, source, the_plan.seeds)
    else:
        (compressed,) = _walk(nodes, target, the_plan.seeds, [source])
    return as_matrix(pattern, decompressed(the_plan, compressed))


def _path_pattern(path: list[Node], target, source) -> Pattern:
    """The pattern of each value on `path` in `source`: a call's result reads what its moving
    arguments read where its own pattern in them says (the structural product)."""
    found = {id(source): Pattern.identity(source.size)}
    for node in path:
        moving = [(i, found[id(a)]) for i, a in enumerate(node.inputs) if id(a) in found]
        per_param = [(p, kernel_patterns(node.kernel, node.primals(), i)) for i, p in moving]
        for k, out in enumerate(node.outputs):
            if out.dtype.kind == "f":
                found[id(out)] = union([p.combine(results[k]) for p, results in per_param]) \
                    or Pattern.empty(out.size, source.size)
    return found.get(id(target)) or Pattern.empty(target.size, source.size)


def _check_examples(path: list[Node], target, source, allow: bool) -> None:
    """batch_jacobian's rule: no call between source and target may mix examples, and the
    examples must end on the target's first axis."""
    crossing = _crossing_calls(path, source, target)
    if not crossing:
        return
    message = (f"batch_jacobian: target[i] must depend on source[i] only, but examples mix in "
               f"{', '.join(dict.fromkeys(crossing))} (e.g. a batch normalization, or a transpose that moves "
               f"the batch axis): result[i] would be the sum over every k of d target[k] / d source[i], not "
               f"the Jacobian of example i. Use tape.jacobian for the full Jacobian, or pass "
               f"allow_cross_example=True to accept that sum (TensorFlow's result).")
    if not allow:
        raise ValueError(message)
    warnings.warn(message, stacklevel=4)


def _one_call(path: list[Node], target, source) -> tuple[Node, int] | None:
    """(node, param) when `path` is one recorded kernel call, taking `source` as its param `param`
    (once) and returning `target` as its one result, its types sharing their leading (example)
    dimension: its batch Jacobian is then one compiled kernel (adc.batch_jacobian), fused and with
    folded seeds, not a walk of batched derivatives."""
    if len(path) != 1 or not isinstance(path[0].kernel, Kernel):
        return None
    node = path[0]
    sig = node.kernel.signature
    params = [i for i, a in enumerate(node.inputs) if a is source]
    if len(params) != 1 or len(node.outputs) != 1 or node.outputs[0] is not target:
        return None
    x, y = sig.param_types[params[0]], sig.result_types[0]
    if x.rank < 2 or y.rank < 2 or x.shape[0] != y.shape[0]:
        return None
    if _example_axes(node.kernel, params[0], 0)[0] is None:
        return None     # the result does not depend on it: unconnected (None), as the walk says; not zeros
    return node, params[0]


def _path(nodes, target, source) -> list[Node]:
    """The recorded calls through which `source` reaches `target`, in call order."""
    reached, forward = {id(source)}, []
    for node in nodes:
        if not reached.isdisjoint(node.keys):
            forward.append(node)
            reached.update(node.output_keys)
    needed, path = {id(target)}, []
    for node in reversed(forward):
        if not needed.isdisjoint(node.output_keys):
            path.append(node)
            needed.update(k for k in node.keys if k in reached)
    return path[::-1]


def _crossing_calls(path: list[Node], source, target) -> list[str]:
    """The names of the calls on `path` whose results mix examples, and "the target" when the
    examples do not end on its axis 0. The examples' axis is followed through each call by the
    IR analysis `example_axes` (adc/passes/example_axis.py); a call with a Python backward
    (adc.custom_gradient) is not looked into: its results keep the examples on axis 0."""
    from adc.passes.example_axis import MIXED   # the IR analyses load with the first batch_jacobian, not with adc

    axes, crossing = {id(source): 0}, []
    for node in path:
        if not isinstance(node.kernel, Kernel):
            axes.update((key, 0) for key, out in zip(node.output_keys, node.outputs) if out.ndim)
            continue
        found: dict[int, set] = {}
        for i, k in enumerate(node.keys):
            if k in axes:
                for key, axis in zip(node.output_keys, _example_axes(node.kernel, i, axes[k])):
                    if axis is not None:
                        found.setdefault(key, set()).add(axis)
        for key, result_axes in found.items():
            if len(result_axes) == 1 and MIXED not in result_axes:
                axes[key] = result_axes.pop()
            elif node.kernel.signature.name not in crossing:
                crossing.append(node.kernel.signature.name)
    if not crossing and axes.get(id(target), 0) != 0:
        crossing.append(f"the target (the examples end on its axis {axes[id(target)]})")
    return crossing


def _example_axes(kernel, param: int, axis: int) -> tuple:
    """Per result of `kernel`, where the examples of `param` along `axis` go (from the IR, cached)."""
    from adc.passes.example_axis import function_example_axes    # as MIXED above: loaded on first use

    return kernel.derived.get("example_axes", (param, axis), lambda: function_example_axes(
        kernel.gradient_source.parsed_ir(), kernel.signature.name, param, axis))
