"""vmap: a function mapped over a batch of examples, with the batch axis where the caller wants it
(JAX's `in_axes` and `out_axes`) — the batching pass (batch.py) with a transpose moving the axis
to the front of each batched param and one moving it from the front of each result.

No new rules: the batched function is `batch`'s, whose results all carry the batch axis first; the
transposes are ordinary ops that fusion folds into the loops that read or write them.

    func @f(%x: f32[N], %w: f32[N]) -> f32 {          vmap(f, in_axes=(1, None), out_axes=(0,)) ==>
      %0 = mul %x, %w : f32[N]                         func @f_vmap(%x: f32[N,NB], %w: f32[N]) -> f32[NB] {
      %1 = reduce_sum %0 {axes = [0]} : f32              %0 = transpose %x {perm = [1,0]} : f32[NB,N]
      return %1                                          ... the batched body on %0 ...
    }                                                  }
"""
from __future__ import annotations

from typing import Sequence

from adc.ir.builder import Builder
from adc.ir.core import Func, Module, Value
from adc.ir.types import TensorType
from adc.ir.verify import verify_func
from adc.passes.adjoint import cleanup, unique_name
from adc.passes.batch import batch
from adc.passes.inline import inline_func


def vmap(module: Module, name: str, in_axes: Sequence[int | None], out_axes: Sequence[int]) -> tuple[Module, Func]:
    """The function `name` mapped over a new batch dimension: param i takes the batch axis at
    position in_axes[i] (None: shared by every example), result j has it at out_axes[j]. Axes are
    non-negative and at most the param's (result's) rank. Named f"{name}_vmap" (made unique);
    verified. Returns the module with it, and the function. Never mutates `module`."""
    func = module[name]
    _check_axes(func, in_axes, out_axes)
    out_name = unique_name(module, f"{name}_vmap")
    if all(a in (None, 0) for a in in_axes) and not any(out_axes):
        return batch(module, name, [a is not None for a in in_axes], out_name)
    module, batched = batch(module, name, [a is not None for a in in_axes])
    b = Builder(module.funcs, func.loc)
    args = []
    for param, inner, axis in zip(func.params, batched.params, in_axes):
        if axis is None:
            args.append(b.param(param.name, param.type))
        else:
            outer = b.param(param.name, _moved(inner.type, 0, axis))
            args.append(_move_axis(b, outer, axis, 0))
    results = b.emit("call", *args, callee=batched.name)
    out = b.finish(out_name, [_move_axis(b, r, 0, axis) for r, axis in zip(results, out_axes)], func.loc)
    funcs = dict(module.funcs)          # inlining copies regions
    out = cleanup(inline_func(out, module, funcs), funcs)
    verify_func(out, funcs, pass_name="vmap")
    return Module(funcs, module.name).replace(out), out


def _check_axes(func: Func, in_axes: Sequence[int | None], out_axes: Sequence[int]) -> None:
    if len(in_axes) != len(func.params) or len(out_axes) != len(func.returns):
        raise ValueError(f"vmap of @{func.name}: {len(in_axes)} in_axes and {len(out_axes)} out_axes for "
                         f"{len(func.params)} params and {len(func.returns)} results")
    shapes = [(p.type, a) for p, a in zip(func.params, in_axes) if a is not None]
    shapes += [(t, a) for t, a in zip(func.result_types, out_axes)]
    if not any(a is not None for a in in_axes) or any(not 0 <= a <= t.rank for t, a in shapes):
        raise ValueError(f"vmap of @{func.name}: axes {list(in_axes)}, {list(out_axes)} out of range")


def _moved(type: TensorType, source: int, destination: int) -> TensorType:
    """`type` with its axis `source` moved to `destination` (np.moveaxis)."""
    shape = list(type.shape)
    shape.insert(destination, shape.pop(source))
    return TensorType(type.dtype, tuple(shape))


def _move_axis(b: Builder, value: Value, source: int, destination: int) -> Value:
    """np.moveaxis(value, source, destination) as a transpose (none when the axis stays)."""
    if source == destination:
        return value
    perm = list(range(value.type.rank))
    perm.insert(destination, perm.pop(source))
    return b.op("transpose", value, perm=perm)
