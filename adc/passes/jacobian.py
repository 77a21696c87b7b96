"""Jacobians as compositions of passes: batching (adc/passes/batch.py) ∘ adjoint
(adc/passes/adjoint.py) in reverse mode, batching ∘ JVP (adc/passes/jvp.py) in forward mode.

- `vjp_batched`: the VJP function batched over its cotangent params, so one call
  pulls back a whole stack of seeds: identity seeds give Jacobian rows, per-example
  seeds a batch Jacobian. Its matmuls fold the seeds into their rows or columns.
  `jvp_batched` pushes a stack of tangent seeds forward the same way.
- `jacobian`: per param, reverse mode (identity seeds of the result's size through
  the batched VJP: one row per seed) or forward mode (identity seeds of the param's
  size through the batched JVP: one column per seed), reshaped to result.shape +
  param.shape. `mode="auto"` takes the one with fewer seeds (`forward_is_cheaper`).
- `gradient`: the VJP of a scalar function at cotangent 1; `hessian`: the Jacobian
  of the gradient, forward-over-reverse by default (as jax.hessian);
  `hvp`: the JVP of the gradient, H·v without H; `batch_jacobian`: per-example
  seeds through either mode, d y[b] / d x[b] for every example b. The runtime's adc.grad /
  adc.jacobian / adc.jacfwd / adc.hessian / adc.hvp / adc.batch_jacobian compile these.

No new rules: these only compose the passes.

    func @f(%x: f64[N]) -> f64[N] {       func @f_jacobian(%x: f64[N]) -> f64[N,N] {
      %0 = sin %x : f64[N]       ==>        %0 = iota {axis = 0, dtype = i64, shape = [N,N]} : i64[N,N]
      return %0                             %1 = iota {axis = 1, dtype = i64, shape = [N,N]} : i64[N,N]
    }                                       %2 = eq %0, %1 : bool[N,N]
                                            %3 = convert %2 {dtype = f64} : f64[N,N]       (the seeds)
                                            %4 = cos %x : f64[N]
                                            %5 = broadcast %4 {dims = [1], shape = [N,N]} : f64[N,N]
                                            %6 = mul %3, %5 : f64[N,N]
                                            return %6
                                          }
"""
from __future__ import annotations

from typing import Iterable

from adc.errors import CompileError
from adc.ir.builder import Builder
from adc.ir.core import Func, Module, Value
from adc.ir.types import I64, SymDim, TensorType, num_elements
from adc.ir.verify import verify_func
from adc.passes.adjoint import cleanup, unique_name, vjp
from adc.passes.adjoint_rules import full
from adc.passes.batch import batch
from adc.passes.example_axis import function_example_axes, where_examples_mix
from adc.passes.inline import inline_func
from adc.passes.jvp import jvp
from adc.passes.one_hot import one_hot_func

MODES = ("auto", "forward", "reverse")
SYMBOL_SIZE = 1000      # what `forward_is_cheaper` takes a dimension symbol to be


def vjp_batched(module: Module, name: str, wanted: Iterable[int] | None = None) -> tuple[Module, Func, tuple[int, ...]]:
    """batch ∘ adjoint: the VJP of `name` (with `wanted`) batched over its cotangent params only,
    primal params shared: (x..., ct[S, ...]) -> (dx[S, ...] for x in wrt). Returns the module
    with the VJP and the new function (f"{name}_vjp_batched", made unique), the function, wrt."""
    module, grad = vjp(module, name, wanted)
    primal = len(module[name].params)
    flags = [i >= primal for i in range(len(grad.func.params))]
    module, func = batch(module, grad.func.name, flags, unique_name(module, f"{name}_vjp_batched"), "S")
    return module, func, grad.wrt


def jvp_batched(module: Module, name: str, wanted: Iterable[int] | None = None) -> tuple[Module, Func, tuple[int, ...]]:
    """batch ∘ JVP: the tangents-only JVP of `name` w.r.t. the `wanted` params, batched over its
    tangent params, primal params shared: (x..., t[S, ...] for x in wrt) -> (dy[S, ...] for each
    float result). Returns the module with it (f"{name}_jvp_batched", made unique), the function, and
    wrt — () when no result depends on those params (Tangent.connected)."""
    module, tangent = jvp(module, name, wanted, primals=False)
    flags = [i >= len(module[name].params) for i in range(len(tangent.func.params))]
    module, func = batch(module, tangent.func.name, flags, unique_name(module, f"{name}_jvp_batched"), "S")
    return module, func, tangent.connected


def gradient(module: Module, name: str, wanted: Iterable[int] | None = None,
             out_name: str | None = None) -> tuple[Module, Func, tuple[int, ...]]:
    """(x...) -> (df/dx_i for i in wanted) of a function with one scalar float result: its VJP at
    cotangent 1 (named f"{name}_grad", or `out_name`; made unique). Returns module, function and
    wanted (default: every float param; one with no path to the result gets zeros)."""
    return _value_and_gradient(module, name, wanted, out_name or f"{name}_grad", "gradient", value=False)


def value_and_gradient(module: Module, name: str, wanted: Iterable[int] | None = None
                       ) -> tuple[Module, Func, tuple[int, ...]]:
    """(x...) -> (f(x), df/dx_i for i in wanted), named f"{name}_value_and_grad" (made unique): the
    value and the gradient in one function, the VJP's own replay of the forward giving the value
    (a loop reversed runs once)."""
    return _value_and_gradient(module, name, wanted, f"{name}_value_and_grad", "value_and_gradient", value=True)


def _value_and_gradient(module: Module, name: str, wanted: Iterable[int] | None, out_name: str, pass_name: str,
                        value: bool) -> tuple[Module, Func, tuple[int, ...]]:
    """The VJP of a scalar function at cotangent 1, with the function's value first if `value`."""
    func, wanted = _single_result(module, name, "gradient", wanted)
    result = func.result_types[0]
    if result.rank:
        raise CompileError(f"the gradient of @{name} needs a scalar result, it returns {result}: "
                           f"differentiate a reduction of it, or take its Jacobian", func.loc)
    module, grad = vjp(module, name, wanted, primals=value)
    b = Builder(module.funcs, func.loc)
    params = [b.param(p.name, p.type) for p in func.params]
    outs = b.emit("call", *params, full(b, 1.0, result), callee=grad.func.name) if grad.wrt or value else ()
    cts = outs[1:] if value else outs
    grads = [cts[grad.wrt.index(i)] if i in grad.wrt else full(b, 0.0, params[i].type) for i in wanted]
    returns = [outs[0], *grads] if value else grads
    return _finished(module, b.finish(unique_name(module, out_name), returns, func.loc), pass_name) + (wanted,)


def jacobian(module: Module, name: str, wanted: Iterable[int] | None = None,
             out_name: str | None = None, mode: str = "auto") -> tuple[Module, Func, tuple[int, ...]]:
    """The function (x...) -> (J_i for i in wanted), J_i of shape result.shape + x_i.shape, of a
    single-result function `name` (named f"{name}_jacobian", or `out_name`; made unique): per param,
    identity seeds through the batched VJP (reverse mode: one seed per result element) or the
    batched JVP (forward mode: one per param element), reshaped; `mode` "auto" picks per param by
    `forward_is_cheaper`. Returns module, function and wanted (default: every float param; one
    with no path to the result gets zeros)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    func, wanted = _single_result(module, name, "Jacobian", wanted)
    result = func.result_types[0]
    forward = [i for i in wanted if mode == "forward" or
               (mode == "auto" and forward_is_cheaper(func.params[i].type, result))]
    reverse = [i for i in wanted if i not in forward]
    module, pullback, wrt = vjp_batched(module, name, reverse) if reverse else (module, None, ())
    pushforwards = {}
    for i in forward:
        module, pushforwards[i], _ = jvp_batched(module, name, [i])
    b = Builder(module.funcs, func.loc)
    params = [b.param(p.name, p.type) for p in func.params]
    rows = b.emit("call", *params, identity_seeds(b, result), callee=pullback.name) if wrt else ()
    jacobians = []
    for i in wanted:
        shape = result.shape + params[i].type.shape
        if i in pushforwards:
            (columns,) = b.emit("call", *params, identity_seeds(b, params[i].type), callee=pushforwards[i].name)
            jacobians.append(_columns_to_jacobian(b, columns, shape))
        elif i in wrt:
            jacobians.append(b.op("reshape", rows[wrt.index(i)], shape=shape))
        else:
            jacobians.append(full(b, 0.0, TensorType(params[i].type.dtype, shape)))
    return _finished(module, b.finish(unique_name(module, out_name or f"{name}_jacobian"), jacobians, func.loc),
                     "jacobian") + (wanted,)


def batch_jacobian(module: Module, name: str, param: int, mode: str = "auto") -> tuple[Module, Func]:
    """(x...) -> J, J[b] = d y[b] / d x[b] of shape [B, *y.shape[1:], *x.shape[1:]], for a function
    whose single float result y shares its leading (example) axis with param x and whose examples do
    not mix (named f"{name}_batch_jacobian", made unique): per-example seeds — one seed per element
    of an example, the same for every example — through the batched JVP (forward mode) or VJP
    (reverse mode); `mode` "auto" picks by `forward_is_cheaper` on one example. Being one-hot and
    built in the IR, the seeds fold into the first matmul they meet (a gather, not a product)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    func, _ = _single_result(module, name, "batch Jacobian", [param])
    x, y = func.params[param].type, func.result_types[0]
    if x.rank < 2 or y.rank < 2 or x.shape[0] != y.shape[0]:
        raise CompileError(f"the batch Jacobian of @{name} needs param '{func.params[param].name}' ({x}) and the "
                           f"result ({y}) of rank >= 2 with the same leading (example) dimension", func.loc)
    if function_example_axes(module, name, param)[0] not in (None, 0):
        culprit = where_examples_mix(module, name, param)
        where = f"here ({culprit.name})" if culprit is not None and culprit.loc else \
            "(a reduction, scan, matmul or gather across the leading axis, or a transpose)"
        raise CompileError(f"the batch Jacobian of @{name}: result[i] must depend on '{func.params[param].name}'[i] "
                           f"only, but examples mix {where}; take the full Jacobian instead",
                           culprit.loc if culprit is not None and culprit.loc else func.loc)
    one_x, one_y = TensorType(x.dtype, x.shape[1:]), TensorType(y.dtype, y.shape[1:])
    forward = mode == "forward" or (mode == "auto" and forward_is_cheaper(one_x, one_y))
    derive = jvp_batched if forward else vjp_batched
    module, derivative, wrt = derive(module, name, [param])
    b = Builder(module.funcs, func.loc)
    params = [b.param(p.name, p.type) for p in func.params]
    shape = y.shape + x.shape[1:]
    if not wrt:
        jacobian = full(b, 0.0, TensorType(x.dtype, shape))
    else:
        (stacked,) = b.emit("call", *params, example_seeds(b, x if forward else y), callee=derivative.name)
        rank = stacked.type.rank
        perm = [*range(1, rank), 0] if forward else [1, 0, *range(2, rank)]    # [S, B, ...] -> J's order
        jacobian = b.op("reshape", b.op("transpose", stacked, perm=perm), shape=shape)
    done = b.finish(unique_name(module, f"{name}_batch_jacobian"), [jacobian], func.loc)
    module, done = _finished(module, done, "batch_jacobian")
    return module.replace(done), done


def example_seeds(b: Builder, type: TensorType) -> Value:
    """Seeds [n, *type.shape], n = the elements of one example (type.shape[1:]): seed k is 1 at
    element k of every example, 0 elsewhere."""
    n = num_elements(type.shape[1:])
    rows, columns = (b.op("iota", axis=axis, dtype=I64, shape=[n, n]) for axis in (0, 1))
    eye = b.op("convert", b.op("eq", rows, columns), dtype=type.dtype)
    every = b.op("broadcast", eye, dims=[0, 2], shape=[n, type.shape[0], n])
    return b.op("reshape", every, shape=(n,) + type.shape)


def forward_is_cheaper(param: TensorType, result: TensorType) -> bool:
    """The mode rule: forward mode when the param has fewer elements than the result (fewer seeds
    to push than to pull). A dimension symbol counts as SYMBOL_SIZE, so f[N] -> f[N, N] is forward
    and f[N, N] -> f[N] reverse; a tie goes to reverse."""
    def size(t: TensorType) -> int:
        n = num_elements(t.shape)
        return n.evaluate(dict.fromkeys(n.symbols, SYMBOL_SIZE)) if isinstance(n, SymDim) else n
    return size(param) < size(result)


def _columns_to_jacobian(b: Builder, columns: Value, shape) -> Value:
    """[S, *result] columns (S = the param's size) as the Jacobian result.shape + param.shape."""
    rank = columns.type.rank
    moved = b.op("transpose", columns, perm=list(range(1, rank)) + [0]) if rank > 1 else columns
    return b.op("reshape", moved, shape=shape)


def hessian(module: Module, name: str, param: int, mode: str = "forward") -> tuple[Module, Func]:
    """(x...) -> d²f / d x_param², of shape x.shape + x.shape, for a function with one scalar
    float result: the Jacobian of its gradient (named f"{name}_hessian", made unique), by default
    forward-over-reverse (`mode` "reverse": reverse-over-reverse)."""
    module, grad, _ = gradient(module, name, [param])
    module, func, _ = jacobian(module, grad.name, [param], out_name=f"{name}_hessian",
                               mode="forward" if mode == "auto" else mode)
    return module.replace(func), func


def hvp(module: Module, name: str, param: int) -> tuple[Module, Func]:
    """(x..., v) -> H·v, H the Hessian of a scalar function w.r.t. param `param` and v of that
    param's type: the JVP of the gradient, forward-over-reverse, H never formed (named
    f"{name}_hvp", made unique)."""
    module, grad, _ = gradient(module, name, [param])
    module, tangent = jvp(module, grad.name, [param], primals=False)
    func = tangent.func
    renamed = Func(unique_name(module, f"{name}_hvp"), func.params, func.ops, func.returns, func.loc)
    return _finished(module, renamed, "hvp")


def _single_result(module: Module, name: str, what: str, wanted) -> tuple[Func, tuple[int, ...]]:
    """The function `name`, checked to have one float result, and `wanted` (default every float param)."""
    if name not in module.funcs:
        raise CompileError(f"no function @{name} to differentiate in {module.name} "
                           f"(functions: {', '.join(module.funcs) or 'none'})")
    func = module[name]
    if len(func.returns) != 1 or not func.result_types[0].dtype.is_float:
        results = ", ".join(str(t) for t in func.result_types) or "nothing"
        raise CompileError(f"the {what} of @{name} needs a single float result, it returns {results}", func.loc)
    if wanted is None:
        wanted = (i for i, p in enumerate(func.params) if p.type.dtype.is_float)
    return func, tuple(wanted)


def _finished(module: Module, func: Func, pass_name: str) -> tuple[Module, Func]:
    """`func` with the calls the composition made inlined, cleaned up, its sums over one-hot seeds made
    gathers (adc/passes/one_hot.py), verified, added to `module`."""
    funcs = dict(module.funcs)          # inlining copies regions
    func = cleanup(one_hot_func(cleanup(inline_func(func, module, funcs), funcs), funcs), funcs)
    verify_func(func, funcs, pass_name=pass_name)
    return Module(funcs, module.name).replace(func), func


def identity_seeds(b: Builder, type: TensorType) -> Value:
    """Seeds [n] + type.shape, n = the number of elements: seed k is 1 at element k, 0 elsewhere."""
    n = num_elements(type.shape)
    rows, columns = (b.op("iota", axis=axis, dtype=I64, shape=[n, n]) for axis in (0, 1))
    eye = b.op("convert", b.op("eq", rows, columns), dtype=type.dtype)
    return b.op("reshape", eye, shape=(n,) + type.shape)
