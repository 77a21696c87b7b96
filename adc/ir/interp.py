"""The NumPy reference interpreter: the oracle that codegen and pass tests compare against.

It runs a function op by op on NumPy arrays in each op's own dtype (an f32
kernel computes in float32), after binding the dimension symbols from the
arguments' shapes. Semantics follow NumPy, with the IR's choices made explicit:
maximum/minimum propagate nan, round is half-to-even, an empty reduce_max is
-inf, float→int conversion truncates, integer `mod` and `floor_div` by 0 give 0
(NumPy's values). Floating-point warnings are silenced:
inf and nan are values here, as in native code.

    func @f(%x: f32[N]) -> f32 {                 run(module, "f", np.ones(3, np.float32))
      %0 = reduce_sum %x {axes = [0]} : f32      -> (array(3., dtype=float32),)
      return %0
    }
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
from dataclasses import dataclass
from functools import lru_cache
from types import GeneratorType
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from adc.errors import CompileError
from adc.ir.core import Func, Module, Op, Value
from adc.ir.ops import OPS
from adc.ir.ops.linalg import triangular_solve_reference
from adc.ir.ops.lu import lu_factor_reference
from adc.ir.trampoline import trampoline
from adc.ir.types import SymDim, evaluate_dim
from adc.ir.shapes import constraints


@dataclass(frozen=True)
class Semantics:
    """What a walk over a function computes with, op by op (the walk binds symbols, checks the shape
    constraints, keeps each value and runs region functions; adc/passes/sparsity walks it too):
    `apply(op, args, ctx)` an op's results from its operands' (a generator for one that runs a
    function: see eval_rules), `bind(func, args)` a kernel's arguments and the symbols they bind,
    `keep(op_name, value, out, ctx)` a result as the walk keeps it, checked against its type."""

    apply: Callable[[Op, Sequence[Any], "Context"], Any]
    bind: Callable[[Func, Sequence[Any]], tuple[list, dict[str, int]]]
    keep: Callable[[str, Value, Any, "Context"], Any]


@dataclass(frozen=True)
class Context:
    """What a rule may need beyond its operands: the bound dimension symbols, the module, and the
    semantics the walk runs (`run` walks a region or callee with them; None: NumPy's)."""

    dims: Mapping[str, int]
    module: Module
    semantics: Semantics | None = None

    def shape(self, dims) -> tuple[int, ...]:
        return tuple(evaluate_dim(d, self.dims) for d in dims)

    def bind(self, func: Func, args: Sequence[Any]) -> tuple[list, dict[str, int]]:
        return (self.semantics or NUMPY).bind(func, args)

    def run(self, func: Func, args: Sequence[Any], dims: Mapping[str, int] | None = None):
        """Function `func` of the module walked on `args` (yield it from a rule); a region runs
        with its parent's symbols, `dims`."""
        return walk(self.module, func, args, self.semantics or NUMPY, dims)


# eval_rules[op_name](args, attrs, ctx) -> tuple of results
#   args:  the operand values, NumPy arrays (0-d for scalars) in the operands' dtypes
#   attrs: the op's Attrs; dimension-valued attributes are evaluated with ctx.shape
#   ctx:   a Context
# The driver casts each result to its declared dtype and checks its shape. A rule that runs a
# function of the module (`call`) is a generator: it yields `ctx.run(...)` and returns what it
# gets back, so calls nest on the trampoline's stack (a chain of calls is as long as the program).
EvalRule = Callable[[Sequence[np.ndarray], Mapping[str, Any], Context], tuple]
eval_rules: dict[str, EvalRule] = {}


def _numpy_rule(fn: Callable) -> EvalRule:
    def rule(args, attrs, ctx):
        out = fn(*args)
        return out if isinstance(out, tuple) else (out,)      # an op of several results gives a tuple
    return rule


for _name, _opdef in OPS.items():
    if _opdef.reference is not None:
        eval_rules[_name] = _numpy_rule(_opdef.reference)


_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)   # B_2, B_4, ...


def _polygamma(x: np.ndarray, order: int) -> np.ndarray:
    """psi (order 0) or psi' (order 1) in f64: 10 steps of the recurrence, the asymptotic series at x + 10,
    the reflection below 0; SciPy's values at the poles (psi: nan, -inf at +0 and +inf at -0; psi': inf) and
    at -inf (nan)."""
    x = np.asarray(x, np.float64)
    negative = x < 0
    z = np.where(negative, 1 - x, x)
    w = 1 / (z + 10)
    steps = sum(1 / (z + i) ** (order + 1) for i in range(10))
    if order == 0:
        series = np.log(z + 10) - w / 2 - sum(b / (2 * k) * w ** (2 * k) for k, b in enumerate(_BERNOULLI, 1))
        y = np.where(negative, series - steps - np.pi / np.tan(np.pi * x), series - steps)
        y = np.where(negative & (x == np.floor(x)), np.nan, y)
        return np.where(x == 0, -np.copysign(np.inf, x), y)
    series = w + w * w / 2 + sum(b * w ** (2 * k + 1) for k, b in enumerate(_BERNOULLI, 1))
    y = np.where(negative, np.pi ** 2 / np.sin(np.pi * x) ** 2 - series - steps, series + steps)
    return np.where(negative & (x == np.floor(x)), np.where(x == -np.inf, np.nan, np.inf), y)


def polygamma_eval(args, attrs, ctx, order):
    (x,) = args
    return (_polygamma(x, order),)


eval_rules["digamma"] = functools.partial(polygamma_eval, order=0)
eval_rules["trigamma"] = functools.partial(polygamma_eval, order=1)


def rsqrt_eval(args, attrs, ctx):
    (x,) = args
    return (np.reciprocal(np.sqrt(x)),)


eval_rules["rsqrt"] = rsqrt_eval


def sigmoid_eval(args, attrs, ctx):
    # 1 / (1 + exp(-x)); exp overflows to inf for very negative x, giving 0
    (x,) = args
    one = np.ones((), x.dtype)
    return (one / (one + np.exp(-x)),)


eval_rules["sigmoid"] = sigmoid_eval


def convert_eval(args, attrs, ctx):
    (x,) = args
    return (x.astype(attrs["dtype"].numpy),)


eval_rules["convert"] = convert_eval


def constant_eval(args, attrs, ctx):
    return (np.asarray(attrs["value"], attrs["dtype"].numpy),)


eval_rules["constant"] = constant_eval


def dim_eval(args, attrs, ctx):
    return (np.asarray(evaluate_dim(attrs["value"], ctx.dims), attrs["dtype"].numpy),)


eval_rules["dim"] = dim_eval


def iota_eval(args, attrs, ctx):
    shape, axis = ctx.shape(attrs["shape"]), attrs["axis"]
    index = np.arange(shape[axis], dtype=attrs["dtype"].numpy)
    along = [1] * len(shape)
    along[axis] = shape[axis]
    return (np.broadcast_to(index.reshape(along), shape),)


eval_rules["iota"] = iota_eval


def broadcast_eval(args, attrs, ctx):
    # operand axis i becomes result axis dims[i]; the other result axes are new
    (x,) = args
    shape = ctx.shape(attrs["shape"])
    placed = [1] * len(shape)
    for axis, size in zip(attrs["dims"], x.shape):
        placed[axis] = size
    return (np.broadcast_to(x.reshape(placed), shape),)


eval_rules["broadcast"] = broadcast_eval


def reshape_eval(args, attrs, ctx):
    (x,) = args
    return (np.reshape(x, ctx.shape(attrs["shape"])),)


eval_rules["reshape"] = reshape_eval


def transpose_eval(args, attrs, ctx):
    (x,) = args
    return (np.transpose(x, attrs["perm"]),)


eval_rules["transpose"] = transpose_eval


def _slices(attrs, ctx) -> tuple[slice, ...]:
    """A slice's (or slice_add's) start:stop:step per axis, as a NumPy index."""
    bounds = zip(ctx.shape(attrs["start"]), ctx.shape(attrs["stop"]), attrs["step"])
    return tuple(slice(lo, hi, st) for lo, hi, st in bounds)


def slice_eval(args, attrs, ctx):
    (x,) = args
    return (x[_slices(attrs, ctx)],)


eval_rules["slice"] = slice_eval


def slice_add_eval(args, attrs, ctx):
    # a copy of base with updates added to its slice (each position once)
    base, updates = args
    out = np.array(base, copy=True)
    out[_slices(attrs, ctx)] += updates
    return (out,)


eval_rules["slice_add"] = slice_add_eval


def concat_eval(args, attrs, ctx):
    return (np.concatenate(args, axis=attrs["axis"]),)


eval_rules["concat"] = concat_eval


def pad_eval(args, attrs, ctx):
    x, value = args
    return (np.pad(x, list(zip(attrs["low"], attrs["high"])), constant_values=value),)


eval_rules["pad"] = pad_eval


def clamped_indices(indices: np.ndarray, n: int) -> np.ndarray:
    """The index rule of gather, scatter_add and scatter (adc/ir/ops/indexing.py): a negative index counts from
    the end once, then every index is clamped to [0, n-1], as native code reads them."""
    wrapped = np.where(indices < 0, indices.astype(np.int64) + n, indices)
    return np.clip(wrapped, 0, max(n - 1, 0))


def gather_eval(args, attrs, ctx):
    # np.take at the clamped indices; an empty axis reads as zeros
    x, indices = args
    axis = attrs["axis"]
    if x.shape[axis] == 0:
        return (np.zeros(x.shape[:axis] + indices.shape + x.shape[axis + 1:], x.dtype),)
    where = clamped_indices(indices, x.shape[axis])
    if where.ndim == 0:     # one index (a loop's step reading its row): a copy of that slice alone, where
        return (x[(slice(None),) * axis + (int(where),)].copy(),)   # np.take first copies a strided x whole
    return (np.take(x, where, axis=axis),)


eval_rules["gather"] = gather_eval


def scatter_add_eval(args, attrs, ctx):
    # np.add.at (duplicates accumulate) at the clamped indices; nothing lands on an empty axis
    base, indices, updates = args
    axis, out = attrs["axis"], base.copy()
    if base.shape[axis]:
        np.add.at(out, (slice(None),) * axis + (clamped_indices(indices, base.shape[axis]),), updates)
    return (out,)


eval_rules["scatter_add"] = scatter_add_eval


def scatter_eval(args, attrs, ctx):
    # each slice written in row-major order of the indices, so of duplicates the last one stays
    base, indices, updates = args
    axis, out = attrs["axis"], np.moveaxis(base.copy(), attrs["axis"], 0)
    if base.shape[axis]:
        rows = np.moveaxis(updates, range(axis, axis + indices.ndim), range(indices.ndim))
        rows = rows.reshape((indices.size,) + out.shape[1:])
        for k, i in enumerate(clamped_indices(indices, base.shape[axis]).ravel()):
            out[i] = rows[k]
    return (np.moveaxis(out, 0, axis),)


eval_rules["scatter"] = scatter_eval


def _identity_of(fn: Callable, dtype: np.dtype) -> Any:
    """The value an empty reduction yields: ±inf for floats, the dtype's extreme for ints."""
    if np.issubdtype(dtype, np.floating):
        return -np.inf if fn is np.max else np.inf
    info = np.iinfo(dtype)
    return info.min if fn is np.max else info.max


def _reduce_rule(fn: Callable) -> EvalRule:
    def rule(args, attrs, ctx):
        (x,) = args
        axes = tuple(attrs["axes"])
        if fn in (np.max, np.min):
            return (fn(x, axis=axes, initial=_identity_of(fn, x.dtype)),)
        return (fn(x, axis=axes, dtype=x.dtype),)
    return rule


for _name, _fn in (("reduce_sum", np.sum), ("reduce_prod", np.prod), ("reduce_max", np.max),
                   ("reduce_min", np.min)):
    eval_rules[_name] = _reduce_rule(_fn)


def _arg_reduce_rule(fn: Callable) -> EvalRule:
    def rule(args, attrs, ctx):
        # NumPy's first occurrence (the first nan wins); an empty axis, where NumPy raises, gives 0
        (x,), (axis,) = args, attrs["axes"]
        if x.shape[axis] == 0:
            return (np.zeros(x.shape[:axis] + x.shape[axis + 1:], np.int64),)
        return (fn(x, axis=axis),)
    return rule


eval_rules["argmax"] = _arg_reduce_rule(np.argmax)
eval_rules["argmin"] = _arg_reduce_rule(np.argmin)


def _scan_rule(fn: Callable, identity: int) -> EvalRule:
    def rule(args, attrs, ctx):
        # np.cumsum / np.cumprod in x's dtype; reverse scans the flipped axis, exclusive shifts in
        # the identity and drops the last element
        (x,), axis = args, attrs["axis"]
        flip = (lambda v: np.flip(v, axis)) if attrs["reverse"] else (lambda v: v)
        out = fn(flip(x), axis=axis, dtype=x.dtype)
        if attrs["exclusive"]:
            first = np.full(x.shape[:axis] + (1,) + x.shape[axis + 1:], identity, x.dtype)
            out = np.concatenate([first, out], axis)[(slice(None),) * axis + (slice(0, x.shape[axis]),)]
        return (flip(out),)
    return rule


eval_rules["cumsum"] = _scan_rule(np.cumsum, 0)
eval_rules["cumprod"] = _scan_rule(np.cumprod, 1)


def matmul_eval(args, attrs, ctx):
    """NumPy's product of contiguous copies: np.matmul sums a broadcast or strided operand in its own
    loop and a contiguous one in BLAS, in another order, so two programs differing only in how an
    operand was laid out (a broadcast where the other has a reshape) would differ in the last bit."""
    a, b = (np.ascontiguousarray(x) for x in args)
    return (np.matmul(a, b),)


eval_rules["matmul"] = matmul_eval


def triangular_solve_eval(args, attrs, ctx):
    return (triangular_solve_reference(*args, **attrs),)


eval_rules["triangular_solve"] = triangular_solve_eval


def lu_factor_eval(args, attrs, ctx):
    return lu_factor_reference(*args)


eval_rules["lu_factor"] = lu_factor_eval


def call_eval(args, attrs, ctx):
    # a callee's symbols bind to its arguments'; a symbol its params do not bind (a region function
    # called by another region) is the caller's
    callee = ctx.module[attrs["callee"]]
    _, bound = ctx.bind(callee, args)
    return (yield ctx.run(callee, args, {**ctx.dims, **bound}))


eval_rules["call"] = call_eval


def custom_gradient_eval(args, attrs, ctx):
    # the value is the forward's; the backward only matters to differentiation
    return (yield ctx.run(ctx.module[attrs["forward"]], args))


eval_rules["custom_gradient"] = custom_gradient_eval


def for_eval(args, attrs, ctx):
    body, k = ctx.module[attrs["body"]], attrs["carried"]
    count, carried, captured = int(args[0]), tuple(args[1:1 + k]), tuple(args[1 + k:])
    for i in range(count):
        carried = yield ctx.run(body, (np.int64(i), *carried, *captured), ctx.dims)
    return carried


def scan_eval(args, attrs, ctx):
    body, k, axis = ctx.module[attrs["body"]], attrs["carried"], attrs["axis"]
    count, carried, captured = max(int(args[0]), 0), tuple(args[1:1 + k]), tuple(args[1 + k:])
    ctx.dims[attrs["length"]] = count       # the symbol the op binds, for the types after it
    rows = body.result_types[k:]
    stacks: list[list[np.ndarray]] = [[] for _ in rows]
    for i in range(count):
        results = yield ctx.run(body, (np.int64(i), *carried, *captured), ctx.dims)
        carried = results[:k]
        for stack, row in zip(stacks, results[k:]):
            stack.append(row)
    empty = [np.empty(ctx.shape(t.shape[:axis] + (0,) + t.shape[axis:]), t.dtype.numpy) for t in rows]
    return (*carried, *(np.stack(s, axis=axis) if s else e for s, e in zip(stacks, empty)))


def while_eval(args, attrs, ctx):
    cond, body, k = ctx.module[attrs["cond"]], ctx.module[attrs["body"]], attrs["carried"]
    carried, captured = tuple(args[:k]), tuple(args[k:])
    while bool((yield ctx.run(cond, (*carried, *captured), ctx.dims))[0]):
        carried = yield ctx.run(body, (*carried, *captured), ctx.dims)
    return carried


def if_eval(args, attrs, ctx):
    branch = attrs["then_branch"] if bool(args[0]) else attrs["else_branch"]
    return (yield ctx.run(ctx.module[branch], args[1:], ctx.dims))


eval_rules["for"] = for_eval
eval_rules["scan"] = scan_eval
eval_rules["while"] = while_eval
eval_rules["if"] = if_eval


def extern_call_eval(args, attrs, ctx):
    # the C function itself, found in the process (libm is loaded by Python), element by element
    fn = c_function(attrs["symbol"], attrs["library"], args[0].dtype, len(args))
    out = np.empty(np.shape(args[0]), args[0].dtype)
    for index in np.ndindex(out.shape):
        out[index] = fn(*(a[index] for a in args))
    return (out,)


eval_rules["extern_call"] = extern_call_eval


@lru_cache(maxsize=None)
def c_function(symbol: str, library: str, dtype: np.dtype, arity: int) -> Callable:
    """The C function `symbol` of shared object `library` ("": this process or libm) taking and
    returning `arity` floats of `dtype`."""
    c_type = ctypes.c_float if dtype == np.float32 else ctypes.c_double
    names = (library,) if library else (None, ctypes.util.find_library("m") or "libm.so.6")
    for lib in (ctypes.CDLL(name) for name in names):
        fn = getattr(lib, symbol, None)
        if fn is not None:
            fn.restype, fn.argtypes = c_type, [c_type] * arity
            return fn
    raise LookupError(f"external function '{symbol}' is not defined in {library or 'this process or in libm'}")


def run(module: Module, name: str, *args) -> tuple[np.ndarray, ...]:
    """Run function `name` on NumPy arguments; returns its results as arrays."""
    if name not in module.funcs:
        raise KeyError(f"no function @{name} in module {module.name}")
    with np.errstate(all="ignore"):
        results = trampoline(walk(module, module[name], args, NUMPY))
    return tuple(np.array(r) for r in results)


def walk(module: Module, func: Func, args: Sequence[Any], semantics: Semantics,
         parent_dims: Mapping[str, int] | None = None):
    """Walk `func` op by op with `semantics` (a generator the trampoline runs: regions and callees
    nest on its stack); a region function (`parent_dims` given) runs with its parent's symbols."""
    values, dims = semantics.bind(func, args) if parent_dims is None else (list(args), dict(parent_dims))
    _check_constraints(func, dims)
    env: dict[Value, Any] = dict(zip(func.params, values))
    ctx = Context(dims, module, semantics)
    for op in func.ops:
        outs = semantics.apply(op, [env[v] for v in op.operands], ctx)
        if isinstance(outs, GeneratorType):
            outs = yield from outs
        for value, out in zip(op.results, outs, strict=True):
            env[value] = semantics.keep(op.name, value, out, ctx)
    return tuple(env[v] for v in func.returns)


def evaluate(op: Op, args: Sequence[np.ndarray], ctx: Context):
    """The interpreter's `apply`: the op's rule of eval_rules."""
    rule = eval_rules.get(op.name)
    if rule is None:
        raise CompileError(f"the interpreter has no rule for op '{op.name}' (eval_rules)", op.loc)
    return rule(args, op.attrs, ctx)


_constraints = lru_cache(maxsize=1024)(constraints)     # a loop runs its body's checks per iteration


def _check_constraints(func: Func, dims: Mapping[str, int]) -> None:
    """ValueError, as compiled code fails, when the sizes break a shape constraint `func` can decide
    on entry (ir/shapes.py): a callee's, a loop body's or a branch's are checked when it runs."""
    for constraint in _constraints(func):
        if constraint.symbols <= dims.keys() and evaluate_dim(constraint, dims) < 0:
            shown = ", ".join(f"{s} = {dims[s]}" for s in sorted(constraint.symbols))
            raise ValueError(f"@{func.name}: the shapes need {constraint} >= 0, but {shown}")


def _checked(name: str, value: Value, out: np.ndarray, ctx: Context) -> np.ndarray:
    out = np.asarray(out)
    shape = ctx.shape(value.type.shape)
    if out.shape != shape:
        raise RuntimeError(f"eval rule of '{name}' produced shape {out.shape}, its type {value.type} says {shape}")
    return out.astype(value.type.dtype.numpy, copy=False)


def bind_arguments(func: Func, args: Sequence[Any]) -> tuple[list[np.ndarray], dict[str, int]]:
    """The arguments as arrays of the parameters' dtypes, and the dimension symbols they bind."""
    if len(args) != len(func.params):
        raise ValueError(f"@{func.name} takes {len(func.params)} arguments, got {len(args)}")
    arrays = [_as_param_array(func, p, a) for p, a in zip(func.params, args)]
    dims: dict[str, int] = {}
    for p, a in zip(func.params, arrays):
        for d, size in zip(p.type.shape, a.shape):
            if isinstance(d, SymDim) and d.is_symbol:
                (symbol,) = d.symbols
                dims.setdefault(symbol, size)
    for p, a in zip(func.params, arrays):
        expected = tuple(evaluate_dim(d, dims) for d in p.type.shape)
        if a.shape != expected:
            raise ValueError(f"@{func.name}: argument %{p.name} has shape {a.shape}, expected {p.type} = "
                             f"{expected} with {_show(dims)}")
    return arrays, dims


def _as_param_array(func: Func, param: Value, arg: Any) -> np.ndarray:
    expected = param.type.dtype.numpy
    array = np.asarray(arg)
    if isinstance(arg, (np.ndarray, np.generic)) and array.dtype != expected:
        raise ValueError(f"@{func.name}: argument %{param.name} has dtype {array.dtype}, expected {expected}")
    if array.ndim != param.type.rank:
        raise ValueError(f"@{func.name}: argument %{param.name} has rank {array.ndim}, expected {param.type}")
    return array.astype(expected, copy=False)


def _show(dims: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in dims.items()) or "no symbols"


NUMPY = Semantics(evaluate, bind_arguments, _checked)
