"""Do the examples of a batch mix? The analysis behind batch_jacobian's cross-example rule.

`example_axes(func, param, axis)` says, per result, along which axis its entry i
depends on entry i of `param` along `axis` only — or MIXED, when an entry may depend
on several examples, and then a batch Jacobian (per-example seeds) is not the
diagonal of the full Jacobian; `depends_across` asks it for axis 0. It tracks, per
value, which axis is still the example axis, with one rule per op in
`example_axis_rules`:

    %0 = tanh %x           example axis 0 -> 0      (elementwise)
    %1 = transpose %0      axis 0 -> 1
    %2 = reduce_sum %1     over axis 1: MIXED       (a batch mean, as in batch normalization)
"""
from __future__ import annotations

from typing import Callable

from adc.ir.core import Func, Module, Op, Value
from adc.ir.ops import OPS
from adc.ir.types import num_elements
from adc.passes.expand import expand_custom_gradients
from adc.passes.inline import inline_func

MIXED = -1      # the value depends on the param, but not example by example along one axis

# example_axis_rules[op_name](op, axes) -> the example axis of each result
#   axes: per operand, None (does not depend on the param), MIXED, or the axis k such that
#         the operand's entries at index i along k depend on example i of the param only
# Called when some operand depends on the param; an op without a rule mixes (conservative).
ExampleAxisRule = Callable[[Op, list["int | None"]], tuple["int | None", ...]]
example_axis_rules: dict[str, ExampleAxisRule] = {}


def example_axes(func: Func, param: int, axis: int = 0) -> tuple[int | None, ...]:
    """Per result of `func`: None when it does not depend on `param`, the axis k along which its
    entry i depends on entry i of `param` along `axis` only, or MIXED. Tracks per value which
    axis, if any, is still the example axis. Conservative: when unsure (an op without a rule, a
    call or custom_gradient: expand and inline first; a scalar param), MIXED."""
    p = func.params[param]
    axes: dict[Value, int | None] = {p: axis if p.type.rank else MIXED}
    for op in func.ops:
        operand_axes = [axes.get(v) for v in op.operands]
        if all(a is None for a in operand_axes):
            continue
        rule = example_axis_rules.get(op.name)
        found = rule(op, operand_axes) if rule and MIXED not in operand_axes else (MIXED,) * len(op.results)
        axes.update(zip(op.results, found))
    return tuple(axes.get(v) for v in func.returns)


def function_example_axes(module: Module, name: str, param: int, axis: int = 0) -> tuple[int | None, ...]:
    """example_axes of function `name` of `module`, its custom gradients expanded and its calls
    inlined (what the analysis cannot look into otherwise)."""
    expanded = expand_custom_gradients(module)
    return example_axes(inline_func(expanded[name], expanded), param, axis)


def depends_across(func: Func, param: int, result: int = 0) -> bool:
    """True when result[i] may depend on param[j] for some i != j along axis 0 (examples mix)."""
    return example_axes(func, param)[result] not in (None, 0)


def _one(axes: list) -> int:
    """The common example axis of the operands that depend on the param, or MIXED."""
    found = {a for a in axes if a is not None}
    return found.pop() if len(found) == 1 else MIXED


def elementwise_example_axis(op, axes):
    # f(x)[i] uses x[i] only: the axis stays where it is (all dependent operands must agree)
    return (_one(axes),)


for _name, _opdef in OPS.items():
    if "elementwise" in _opdef.traits:
        example_axis_rules[_name] = elementwise_example_axis


def broadcast_example_axis(op, axes):
    # axis k moves to dims[k], unless a size-1 example axis is stretched (every example is example 0)
    (k,), x = axes, op.operands[0]
    target = op.attrs["dims"][k]
    return (target if x.type.shape[k] == op.attrs["shape"][target] else MIXED,)


example_axis_rules["broadcast"] = broadcast_example_axis


def reshape_example_axis(op, axes):
    # kept when a result axis has the same size and the same number of elements before it
    (k,), shape = axes, op.operands[0].type.shape
    before = num_elements(shape[:k])
    new = op.attrs["shape"]
    for j, size in enumerate(new):
        if size == shape[k] and num_elements(new[:j]) == before:
            return (j,)
    return (MIXED,)


example_axis_rules["reshape"] = reshape_example_axis


def transpose_example_axis(op, axes):
    # result axis j is operand axis perm[j]
    return (list(op.attrs["perm"]).index(axes[0]),)


example_axis_rules["transpose"] = transpose_example_axis


def slice_example_axis(op, axes):
    # kept only when the slice takes the whole example axis (an offset pairs i with start + i)
    (k,), a = axes, op.attrs
    whole = a["start"][k] == 0 and a["stop"][k] == op.operands[0].type.shape[k] and a["step"][k] == 1
    return (k if whole else MIXED,)


example_axis_rules["slice"] = slice_example_axis


def gather_example_axis(op, axes):
    # take(x, i, a) puts i's axes in place of axis a: an example axis of x before a stays, one after
    # it moves past them; gathering along it, or by indices computed from the param, mixes
    (k, index), a = axes, op.attrs["axis"]
    if index is not None or k == a:
        return (MIXED,)
    return (k if k < a else k - 1 + op.operands[1].type.rank,)


example_axis_rules["gather"] = gather_example_axis


def scatter_example_axis(op, axes):
    # scatter(base, i, u, a): base's entries stay where they are; u's axes map back onto base's as
    # take's do, and its axes from i's (the positions along a) mix; indices computed from the param mix
    (base, index, updates), a = axes, op.attrs["axis"]
    rank = op.operands[1].type.rank
    if updates is not None:
        updates = updates if updates < a else MIXED if updates < a + rank else updates + 1 - rank
    return (MIXED if index is not None else _one([base, updates]),)


example_axis_rules["scatter"] = scatter_example_axis
example_axis_rules["scatter_add"] = scatter_example_axis


def pad_example_axis(op, axes):
    # kept when nothing is padded along the example axis and the padding value does not depend on it
    (k, value), a = axes, op.attrs
    return (k if value is None and a["low"][k] == a["high"][k] == 0 else MIXED,)


example_axis_rules["pad"] = pad_example_axis


def concat_example_axis(op, axes):
    # kept when joining along another axis
    k = _one(axes)
    return (k if k != op.attrs["axis"] else MIXED,)


example_axis_rules["concat"] = concat_example_axis


def reduce_example_axis(op, axes):
    # reducing over the example axis mixes; otherwise it moves left past the reduced axes before it
    (k,), reduced = axes, op.attrs["axes"]
    return (MIXED if k in reduced else k - sum(1 for r in reduced if r < k),)


for _name, _opdef in OPS.items():
    if "reduction" in _opdef.traits:
        example_axis_rules[_name] = reduce_example_axis


def scan_example_axis(op, axes):
    # scanning along the example axis mixes; along another axis it stays
    (k,) = axes
    return (MIXED if k == op.attrs["axis"] else k,)


for _name, _opdef in OPS.items():
    if "scan" in _opdef.traits:
        example_axis_rules[_name] = scan_example_axis


def matmul_example_axis(op, axes):
    # (A @ B)[.., m, n] = sum_k A[.., m, k] B[.., k, n]: batch axes and A's rows / B's columns keep
    # the example axis; the contracted axis mixes
    rank = op.result.type.rank
    left, right = axes
    rows = {None: None, rank - 1: MIXED, rank - 2: rank - 2}.get(left, left)
    columns = {None: None, rank - 2: MIXED, rank - 1: rank - 1}.get(right, right)
    return (_one([rows, columns]) if MIXED not in (rows, columns) else MIXED,)


example_axis_rules["matmul"] = matmul_example_axis
