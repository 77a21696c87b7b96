"""The batching pass (vmap): the function that processes a whole batch of examples in one call.

`batch(module, name, batched)` inlines the function, gives each param marked
True an extra leading axis of a new dimension symbol (`NB`, made unique), and
rewrites every op that meets a batched value with its rule in `batch_rules`
(adc/passes/batch_rules.py); ops on shared values only are kept as they are, so
work that does not depend on the example is done once. Every result gets the
leading batch axis. Cleanup (simplify, cse, dce) and the verifier follow, as
for the adjoint pass. Composed with it, this gives Jacobians
(adc/passes/jacobian.py).

Invariant: a value of the batched function is either the original value
(shared by every example) or its batched version, of type [NB] + its type.

    func @f(%x: f32[N], %w: f32[N]) -> f32[N] {      func @f_batched(%x: f32[NB,N], %w: f32[N]) -> f32[NB,N] {
      %0 = mul %x, %w : f32[N]               ==>       %0 = broadcast %w {dims = [1], shape = [NB,N]} : f32[NB,N]
      return %0                                        %1 = mul %x, %0 : f32[NB,N]
    }                                                  return %1
                                                     }
"""
from __future__ import annotations

from types import GeneratorType
from typing import Sequence

from adc.errors import CompileError
from adc.ir.builder import Builder
from adc.ir.core import Func, Module, Op, Value
from adc.ir.trampoline import trampoline
from adc.ir.types import Dim, SymDim
from adc.ir.verify import verify_func
from adc.passes.adjoint import unique_name, cleanup
from adc.passes.batch_rules import batch_rules, with_batch_axis
from adc.passes.inline import inline_func
from adc.passes.regions import call_free, fresh_name, symbols_within


def batch(module: Module, name: str, batched: Sequence[bool], name_out: str | None = None,
          axis_name: str = "NB") -> tuple[Module, Func]:
    """The function that processes a whole batch in one call: params marked True carry an extra
    leading axis of a new dimension symbol (`axis_name`, made unique); the others are shared by
    every example. Every result gets the leading batch axis. Inlines calls first; cleans up
    (simplify, cse, dce); verifies. Returns the module plus the new function (named `name_out`,
    default f"{name}_batched" made unique). Never mutates `module`."""
    return trampoline(_batch(module, name, batched, name_out, axis_name))


def _batch(module: Module, name: str, batched: Sequence[bool], name_out: str | None, axis_name: str):
    """`batch` as a generator for the trampoline: batching a custom gradient batches its forward,
    which may hold another, as deep as a chain of kernels is long."""
    if name not in module.funcs:
        raise CompileError(f"no function @{name} to batch in {module.name} "
                           f"(functions: {', '.join(module.funcs) or 'none'})")
    funcs = dict(module.funcs)      # rules may add batched callees (custom_gradient) and regions
    func = inline_func(module[name], module, funcs)
    flags = list(batched)
    if len(flags) != len(func.params):
        raise ValueError(f"@{name} has {len(func.params)} params but {len(flags)} batched flags were given")
    if not any(flags):
        raise ValueError(f"batching @{name} needs at least one batched param")
    size = SymDim.symbol(_fresh_symbol(symbols_within(funcs, func), axis_name))
    out = yield from _batch_func(func, flags, name_out or unique_name(module, f"{name}_batched"), funcs, size)
    out = cleanup(out, funcs)
    verify_func(out, funcs, pass_name="batch")
    return Module(funcs, module.name).replace(out), out


def batch_callees(funcs: dict[str, Func], names: Sequence[str]):
    """Add to `funcs` (a pass's own copy) the functions `names` batched over all their params,
    with one batch symbol for all of them, so their types still fit together; their new names.
    A generator for the trampoline, as a batch rule that needs it is."""
    axis_name = _fresh_symbol(set().union(*(funcs[n].dim_symbols for n in names)), "NB")
    batched = []
    for name in names:
        module, func = yield _batch(Module(funcs), name, [True] * len(funcs[name].params), None, axis_name)
        funcs.update(module.funcs)
        batched.append(func.name)
    return batched


def batch_region(funcs: dict[str, Func], name: str, flags: Sequence[bool], size: Dim):
    """Add to `funcs` (a pass's own copy) region function `name` batched along `size`, the batch
    axis of the function it is a region of (a region shares its parent's symbols); its params
    flagged True and all its results get that axis. A generator for the trampoline, as the
    control-flow batch rules are."""
    func = call_free(funcs, name)
    out = yield from _batch_func(func, list(flags), fresh_name(funcs, f"{name}_batched"), funcs, size)
    out = cleanup(out, funcs)
    funcs[out.name] = out
    return out


def _batch_func(func: Func, flags: list[bool], name: str, funcs: dict[str, Func], size: Dim):
    b = Builder(funcs, func.loc)
    values: dict[Value, Value] = {}      # original value -> its version in the batched function
    batched: set[Value] = set()          # the versions that carry the batch axis
    for p, flag in zip(func.params, flags):
        if flag:
            values[p] = b.param(p.name, p.type.with_shape((size,) + p.type.shape))
            batched.add(values[p])
        else:
            b.params.append(p)
    for op in func.ops:
        yield from _batch_op(b, op, values, batched)
    returns = [values.get(v, v) for v in func.returns]
    returns = [v if v in batched else with_batch_axis(b, v, size) for v in returns]
    return b.finish(name, returns, func.loc)


def _batch_op(b: Builder, op: Op, values: dict[Value, Value], batched: set[Value]):
    """Keep an op on shared values; rewrite one with a batched operand by its rule (a rule that
    batches functions is a generator, run on the trampoline)."""
    args = [values.get(v, v) for v in op.operands]
    flags = [a in batched for a in args]
    if not any(flags):
        b.ops.append(op)
        return
    rule = batch_rules.get(op.name)
    if rule is None:
        raise CompileError(f"cannot batch op '{op.name}': no rule in batch_rules", op.loc)
    with b.at(op.loc):
        outcome = rule(b, op, args, flags)
        if isinstance(outcome, GeneratorType):
            outcome = yield from outcome
    results, result_flags = outcome
    for old, new, flag in zip(op.results, results, result_flags, strict=True):
        values[old] = new
        if flag:
            batched.add(new)


def _fresh_symbol(taken: set[str], base: str) -> str:
    candidate, n = base, 1
    while candidate in taken:
        candidate, n = f"{base}{n}", n + 1
    return candidate
