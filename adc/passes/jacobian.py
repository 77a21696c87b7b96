"""Jacobians as compositions of passes: batching (adc/passes/batch.py) ∘ adjoint
(adc/passes/adjoint.py) in reverse mode, batching ∘ JVP (adc/passes/jvp.py) in forward mode.

- `vjp_batched`: the VJP function batched over its cotangent params, so one call
  pulls back a whole stack of seeds: identity seeds give Jacobian rows, per-example
  seeds a batch Jacobian. Its matmuls fold the seeds into their rows or columns.
  `jvp_batched` pushes a stack of tangent seeds forward the same way.
- `jacobian`: per param, reverse mode (identity seeds of the result's size through
  the batched VJP: one row per seed) or forward mode (identity seeds of the param's
  size through the batched JVP: one column per seed), reshaped to result.shape +
  param.shape. `mode="auto"` takes the one with fewer seeds (`forward_is_cheaper`). Where
  the seeds would make a value larger than the result (and JACOBIAN_BYTES), the seeds go in
  blocks, a loop over them (`_bounded`): a Jacobian's memory stays near its result's.
- `sparse_jacobian`: the seeds of a coloring (passes/sparsity) through one batched JVP or VJP,
  the nonzeros gathered from the products: a sparse Jacobian at fixed sizes, for `adc compile`.
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

from typing import Callable, Iterable, Sequence

from adc.errors import CompileError
from adc.ir.builder import Builder, full
from adc.ir.core import Func, FuncRef, Module, Value
from adc.ir.types import I64, Dim, SymDim, TensorType, num_elements
from adc.ir.verify import verify_func
from adc.passes.adjoint import cleanup, unique_name, vjp
from adc.passes.adjoint_control_flow import fresh_symbol
from adc.passes.batch import batch
from adc.passes.example_axis import function_example_axes, where_examples_mix
from adc.passes.inline import inline_func
from adc.passes.jvp import jvp
from adc.passes.one_hot import one_hot_func
from adc.passes.regions import build_region, like

MODES = ("auto", "forward", "reverse")
SYMBOL_SIZE = 1000      # what `forward_is_cheaper` takes a dimension symbol to be
JACOBIAN_BYTES = 256 << 20      # what a value of a Jacobian's block of seeds may hold, when larger than the result


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

    def build(b: Builder, params: list[Value], seeded: SeededCall) -> list[Value]:
        rows = seeded(b, pullback, params, result, False) if wrt else ()
        jacobians = []
        for i in wanted:
            shape = result.shape + params[i].type.shape
            if i in pushforwards:
                (columns,) = seeded(b, pushforwards[i], params, params[i].type, False)
                jacobians.append(_columns_to_jacobian(b, columns, shape))
            elif i in wrt:
                jacobians.append(b.op("reshape", rows[wrt.index(i)], shape=shape))
            else:
                jacobians.append(full(b, 0.0, TensorType(params[i].type.dtype, shape)))
        return jacobians
    return _bounded(module, func, unique_name(module, out_name or f"{name}_jacobian"), build, "jacobian") + (wanted,)


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
    shape = y.shape + x.shape[1:]

    def build(b: Builder, params: list[Value], seeded: SeededCall) -> list[Value]:
        if not wrt:
            return [full(b, 0.0, TensorType(x.dtype, shape))]
        (stacked,) = seeded(b, derivative, params, x if forward else y, True)
        rank = stacked.type.rank
        perm = [*range(1, rank), 0] if forward else [1, 0, *range(2, rank)]    # [S, B, ...] -> J's order
        return [b.op("reshape", b.op("transpose", stacked, perm=perm), shape=shape)]
    module, done = _bounded(module, func, unique_name(module, f"{name}_batch_jacobian"), build, "batch_jacobian")
    return module.replace(done), done


SeededCall = Callable[[Builder, Func, list, TensorType, bool], tuple]


def _bounded(module: Module, func: Func, out_name: str, build: Callable[[Builder, list, SeededCall], list],
             pass_name: str) -> tuple[Module, Func]:
    """The Jacobian function `out_name` of `func`'s params returning `build`'s values, its seeds
    pushed or pulled all at once (`_all_seeds`: one batched call, the seeds folded by the one-hot
    pass) where none of its values can be larger than both JACOBIAN_BYTES and the result with all the
    values of `func` (a value the seeds make larger, with more elements than those); in blocks
    of seeds (`_seed_blocks`: a loop) where one surely is (static sizes); else the one or the other
    as the sizes bound at run time say (an `if`)."""
    whole_module, whole = _built(module, func, out_name, lambda b, params: build(b, params, _all_seeds), pass_name)
    own = [*whole.returns, *func.params, *(r for op in func.ops for r in op.results)]
    elements, own_bytes = sum((num_elements(v.type.shape) for v in own), 0), _value_bytes(func, own)
    larger = [_value_bytes(whole, [r]) for op in whole.ops for r in op.results
              if not (_at_most(num_elements(r.type.shape), elements)
                      or _at_most(_value_bytes(whole, [r]), JACOBIAN_BYTES))]
    if not larger:
        return whole_module, whole
    whole = Func(f"{out_name}_whole", whole.params, whole.ops, whole.returns, whole.loc)
    whole_module = Module(dict(whole_module.funcs), module.name).replace(whole)
    module, blocks = _built(whole_module, func, f"{out_name}_blocks",
                            lambda b, params: build(b, params, _seed_blocks), pass_name)
    if all(isinstance(size, int) for size in [own_bytes, *larger]):
        return _built(module, func, out_name, lambda b, params: b.emit("call", *params, callee=blocks.name),
                      pass_name)

    def choose(b: Builder, params: list[Value]) -> tuple[Value, ...]:
        bound = b.op("maximum", _i64(b, own_bytes), b.op("constant", dtype=I64, value=JACOBIAN_BYTES))
        largest = _i64(b, larger[0])
        for size in larger[1:]:
            largest = b.op("maximum", largest, _i64(b, size))
        fits = b.op("le", largest, bound)
        return b.emit("if", fits, *params, then_branch=FuncRef(whole.name), else_branch=FuncRef(blocks.name))
    return _built(module, func, out_name, choose, pass_name)


def all_seeds_at_once(module: Module, func: Func) -> Func:
    """The function of `module` computing Jacobian `func` with all its seeds at once: `func`, or
    the branch of its `if` that does when it may also go in blocks (`_bounded`)."""
    return module.funcs.get(f"{func.name}_whole", func)


def _built(module: Module, func: Func, name: str, build: Callable[[Builder, list], Sequence[Value]],
           pass_name: str) -> tuple[Module, Func]:
    """A function `name` of `func`'s params returning what `build` emits, finished (_finished)."""
    funcs = dict(module.funcs)
    b = Builder(funcs, func.loc)
    params = [b.param(p.name, p.type) for p in func.params]
    done = b.finish(name, list(build(b, params)), func.loc)
    return _finished(Module(funcs, module.name), done, pass_name)


def _all_seeds(b: Builder, derivative: Func, params: list, seeded: TensorType, per_example: bool) -> tuple:
    """`derivative` (a batched VJP or JVP) called once on every one-hot seed of `seeded` (per
    example: `example_seeds`), stacked on the leading seed axis."""
    seeds = example_seeds(b, seeded) if per_example else identity_seeds(b, seeded)
    return b.emit("call", *params, seeds, callee=derivative.name)


def _seed_blocks(b: Builder, derivative: Func, params: list, seeded: TensorType, per_example: bool) -> tuple:
    """What `_all_seeds` gives, computed by a loop over blocks of seeds: as many per block as keep
    the seed-axis values of `derivative` (its per-seed bytes, `_value_bytes` at one seed) within
    JACOBIAN_BYTES, at least 1. A block's seed positions come from a scan counting to the block's
    size (a length bound at run time); the last block ends at the last seed (it may overlap the one
    before), and each block's rows are scattered into the stacked results."""
    (seed_axis,) = derivative.params[-1].type.shape[0].symbols     # the seeds are its last param
    n = num_elements(seeded.shape[1:] if per_example else seeded.shape)
    one = b.op("constant", dtype=I64, value=1)
    total = _i64(b, n)
    values = [*derivative.params, *(r for op in derivative.ops for r in op.results)]
    per_seed = b.op("maximum", _i64(b, _value_bytes(derivative, values, {seed_axis: 1})), one)
    budget = b.op("floor_div", b.op("constant", dtype=I64, value=JACOBIAN_BYTES), per_seed)
    size = b.op("maximum", b.op("minimum", total, budget), one)
    count = b.op("floor_div", b.op("add", total, b.op("sub", size, one)), size)
    stacked = [TensorType(t.dtype, (n,) + t.shape[1:]) for t in derivative.result_types]
    inits = [full(b, 0.0, t) for t in stacked]
    region = [Value(TensorType(I64), "block"), *like(inits, [f"rows{k}" for k in range(len(inits))]),
              *like(params), Value(TensorType(I64), "size"), Value(TensorType(I64), "total")]

    def block(inner: Builder) -> list[Value]:
        k, rows, args, size, total = region[0], region[1:1 + len(inits)], region[1 + len(inits):-2], *region[-2:]
        first = inner.op("minimum", inner.op("mul", k, size), inner.op("sub", total, size))
        length = fresh_symbol(region, (), "L")
        counter = build_region(inner.funcs, f"{derivative.name}_count", [Value(TensorType(I64), "i")],
                               lambda c: [c.params[0]], derivative.loc)
        (steps,) = inner.emit("scan", size, axis=0, body=counter, carried=0, length=length)
        positions = inner.op("add", steps, inner.op("broadcast", first, dims=[], shape=steps.type.shape))
        seeds = _seeds_at(inner, positions, seeded, per_example)
        found = inner.emit("call", *args, seeds, callee=FuncRef(derivative.name))
        return [inner.op("scatter", r, positions, f, axis=0) for r, f in zip(rows, found)]

    body = build_region(b.funcs, f"{derivative.name}_block", region, block, derivative.loc)
    return b.emit("for", count, *inits, *params, size, total, body=body, carried=len(inits), checkpoint=0)


def _seeds_at(b: Builder, positions: Value, type: TensorType, per_example: bool) -> Value:
    """The one-hot seeds at `positions` (i64[L]) as [L, *type.shape]: seed j is 1 at flat element
    positions[j] (of every example, `per_example`), 0 elsewhere."""
    count = positions.type.shape[0]
    n = num_elements(type.shape[1:] if per_example else type.shape)
    rows = b.op("broadcast", positions, dims=[0], shape=[count, n])
    columns = b.op("iota", axis=1, dtype=I64, shape=[count, n])
    ones = b.op("convert", b.op("eq", rows, columns), dtype=type.dtype)
    if per_example:
        ones = b.op("broadcast", ones, dims=[0, 2], shape=[count, type.shape[0], n])
    return b.op("reshape", ones, shape=(count,) + type.shape)


def _value_bytes(func: Func, values: Iterable[Value], at: dict | None = None) -> Dim:
    """The bytes of `values` (of `func`) whose sizes `func`'s params bind, as a dimension expression
    of their symbols; with `at` ({symbol: size}), of those whose shapes have one of its symbols, at
    those sizes (the bytes per seed, at={seed axis: 1})."""
    known = {s for p in func.params for s in p.type.symbols} - set(at or ())
    total: Dim = 0
    for value in values:
        size = num_elements(value.type.shape)
        if at is not None:
            if value.type.symbols.isdisjoint(at):
                continue        # no seed axis
            size = size.evaluate({**{s: SymDim.symbol(s) for s in size.symbols}, **at})
        if isinstance(size, int) or size.symbols <= known:
            total = total + size * value.type.dtype.numpy.itemsize
    return total


def _at_most(size: Dim, bound: Dim) -> bool:
    """Whether `size` <= `bound` for all sizes >= 1 of their symbols: each negative term of the
    difference is covered by positive terms whose monomials it divides (those are at least as large)."""
    gap = bound - size
    if isinstance(gap, int):
        return gap >= 0
    spare = {mono: c for mono, c in gap.terms if c > 0}
    for mono, c in gap.terms:
        need = -c
        for other in spare if c < 0 else ():
            if need and _divides(mono, other):
                taken = min(need, spare[other])
                spare[other] -= taken
                need -= taken
        if c < 0 and need:
            return False
    return True


def _divides(mono: tuple[str, ...], other: tuple[str, ...]) -> bool:
    """Whether monomial `mono` divides `other` (each symbol as often, at least): then mono <= other."""
    return all(other.count(s) >= mono.count(s) for s in set(mono))


def _i64(b: Builder, size: Dim) -> Value:
    """A size as an i64 scalar: a constant, or computed from the bound symbols (`dim`)."""
    if isinstance(size, int):
        return b.op("constant", dtype=I64, value=size)
    return b.op("dim", dtype=I64, value=size)


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


def sparse_jacobian(module: Module, name: str, param: int, colors: int, nonzeros: int, forward: bool,
                    out_name: str | None = None) -> tuple[Module, Func]:
    """(x..., colors: i64[n], index: i64[nonzeros]) -> the nonzeros of d result / d x_param: the
    seeds of a coloring of `colors` colors (seed c is 1 where `colors` == c, over the param forward,
    over the result in reverse) pushed through the batched JVP or pulled through the batched VJP in
    one call, and the flat products gathered at `index` (adc/passes/sparsity/compression.py).
    Named f"{name}_sparse_jacobian" or `out_name`, made unique."""
    func, _ = _single_result(module, name, "sparse Jacobian", [param])
    seeded = func.params[param].type if forward else func.result_types[0]
    module, derivative, wrt = (jvp_batched if forward else vjp_batched)(module, name, [param])
    funcs = dict(module.funcs)
    b = Builder(funcs, func.loc)
    params = [b.param(p.name, p.type) for p in func.params]
    n = num_elements(seeded.shape)
    color_of = b.param("colors", TensorType(I64, (n,)))
    index = b.param("index", TensorType(I64, (nonzeros,)))
    dtype = func.result_types[0].dtype if forward else seeded.dtype
    if not (wrt and nonzeros):
        values = full(b, 0.0, TensorType(dtype, (nonzeros,)))
    else:
        rows = b.op("iota", axis=0, dtype=I64, shape=[colors, n])
        ones = b.op("eq", rows, b.op("broadcast", color_of, dims=[1], shape=[colors, n]))
        seeds = b.op("reshape", b.op("convert", ones, dtype=seeded.dtype), shape=(colors,) + seeded.shape)
        (products,) = b.emit("call", *params, seeds, callee=derivative.name)
        flat = b.op("reshape", products, shape=[num_elements(products.type.shape)])
        values = b.op("gather", flat, index, axis=0)
    done = b.finish(unique_name(module, out_name or f"{name}_sparse_jacobian"), [values], func.loc)
    return _finished(Module(funcs, module.name), done, "sparse_jacobian")


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
