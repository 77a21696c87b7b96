"""A VJP split in two: a forward that also returns what the backward needs, and that backward.

A VJP function (adjoint.py) replays the primal ops before it walks them backwards, so a
gradient taken after a forward call computes the forward twice. `split_vjp` partitions the
ops of "primal results + VJP" by whether they depend on a cotangent:

- `{name}_fwd(x...) -> (results..., residuals...)`: the ops that do not, returning the
  primal results and the residuals — their values the backward reads;
- `{name}_bwd(x..., residuals..., ct...) -> (dx for x in wrt)`: the ops that do, reading
  residuals from params. Ops that cost nothing once fused (constants, dims, broadcasts,
  reshapes, transposes) are recomputed there: their operands are saved instead; so are
  the ops making values whose size only the op knows (a loop's stored states, `scan`), which
  no kernel can return — the backward runs the recording loop again.

The tape calls the forward while recording and keeps the residuals, so `gradient()` runs the
backward alone (adc/runtime/tape.py). Both are ordinary, verified IR, like every pass's output.

    func @f(%x: f32[N]) -> f32 {            func @f_fwd(%x) -> (f32, f32[N])      (sum, cos x)
      %0 = sin %x : f32[N]          ==>     func @f_bwd(%x, %res0: f32[N], %ct: f32) -> f32[N]
      %1 = reduce_sum %0 ...                  (broadcast %ct times %res0)
      return %1
    }
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from adc.errors import CompileError
from adc.ir.core import Func, Module, Op, Value
from adc.ir.ops import with_trait
from adc.ir.verify import verify_func
from adc.passes.adjoint import adjoint, cleanup
from adc.passes.inline import inline_func
from adc.passes.regions import derived_once, fresh_name

# Ops recomputed by the backward rather than saved: free once fused into their consumers.
RECOMPUTED = with_trait("cheap")


@dataclass(frozen=True)
class SplitVjp:
    """The two halves; the backward differentiates w.r.t. the primal params `wrt`."""

    forward: Func
    backward: Func
    wrt: tuple[int, ...]


def split_vjp(module: Module, name: str, wanted: Iterable[int] | None = None) -> tuple[Module, SplitVjp]:
    """The forward and backward halves of the VJP of `name` (for the `wanted` params, default
    all), cleaned up and verified. Returns the module holding the two (named f"{name}_fwd",
    f"{name}_bwd", made unique) and the functions they reference, and the SplitVjp. Never
    mutates `module`."""
    if name not in module.funcs:
        raise CompileError(f"no function @{name} to differentiate in {module.name} "
                           f"(functions: {', '.join(module.funcs) or 'none'})")
    funcs = dict(module.funcs)          # inlining copies regions, rules add region functions
    split = split_in(funcs, name, wanted)
    extended = Module(funcs, module.name)
    needed = {**extended.reachable(split.forward.name).funcs, **extended.reachable(split.backward.name).funcs}
    return Module({n: f for n, f in extended.funcs.items() if n in needed}, module.name), split


def split_in(funcs: dict[str, Func], name: str, wanted: Iterable[int] | None = None) -> SplitVjp:
    """split_vjp within a pass's own copy of the functions, which gets the two halves (the
    reversal of a loop splits its body so the backward reads what the forward stored), once per
    function and `wanted` (regions.derived_once)."""
    key = ("split", None if wanted is None else tuple(sorted(set(wanted))))
    return derived_once(funcs, funcs[name], key, lambda split: (split.forward, split.backward),
                        lambda: _split(funcs, name, wanted))


def _split(funcs: dict[str, Func], name: str, wanted: Iterable[int] | None) -> SplitVjp:
    primal = inline_func(funcs[name], Module(dict(funcs)), funcs)
    grad = adjoint(primal, name, funcs, wanted)
    n_params = len(primal.params)
    both = cleanup(Func(name, grad.func.params, grad.func.ops, primal.returns + grad.func.returns, primal.loc),
                   funcs)
    params, cotangents = both.params[:n_params], both.params[n_params:]
    results, grads = both.returns[:len(primal.returns)], both.returns[len(primal.returns):]
    tangent, saved, recomputed = _partition(both, params, cotangents, grads)
    forward_ops = [op for op in both.ops if op not in tangent]
    residuals = [v for op in forward_ops if op not in recomputed for v in op.results if v in saved]
    taken = {p.name for p in both.params}
    residual_params = {v: Value(v.type, _fresh(f"res{k}", taken)) for k, v in enumerate(residuals)}
    backward_ops = [Op(op.name, tuple(residual_params.get(v, v) for v in op.operands), op.attrs, op.results, op.loc)
                    for op in both.ops if op in recomputed or op in tangent]
    fwd_name = fresh_name(funcs, f"{name}_fwd")
    forward = cleanup(Func(fwd_name, params, tuple(forward_ops), results + tuple(residuals), primal.loc), funcs)
    funcs[fwd_name] = forward
    backward = cleanup(Func(fresh_name(funcs, f"{name}_bwd"), params + tuple(residual_params.values()) + cotangents,
                            tuple(backward_ops), tuple(residual_params.get(v, v) for v in grads), primal.loc),
                       funcs)
    funcs[backward.name] = backward
    for func in (forward, backward):
        verify_func(func, funcs, pass_name="split_vjp")
    return SplitVjp(forward, backward, grad.wrt)


def _partition(func: Func, params, cotangents, grads) -> tuple[set[Op], set[Value], set[Op]]:
    """(ops depending on a cotangent, forward values the backward reads, forward ops the backward
    recomputes — RECOMPUTED ops it reads, whose operands it then reads in their place)."""
    depends = set(cotangents)
    tangent: set[Op] = set()
    producers = {}
    for op in func.ops:
        if depends.intersection(op.operands):
            tangent.add(op)
            depends.update(op.results)
        else:
            producers.update((v, op) for v in op.results)
    read = [v for op in tangent for v in op.operands if v not in depends] + [v for v in grads if v not in depends]
    bound = set(func.dim_symbols)
    saved: set[Value] = set()
    recomputed: set[Op] = set()
    while read:
        value = read.pop()
        op = producers.get(value)
        if op is not None and (op.name in RECOMPUTED or not value.type.symbols <= bound):
            if op not in recomputed:
                recomputed.add(op)
                read.extend(op.operands)
        elif value not in saved:
            saved.add(value)
    return tangent, saved - set(params), recomputed


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name = "_" + name
    taken.add(name)
    return name
