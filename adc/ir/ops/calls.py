"""Calls: of another function of the module, of a custom gradient's forward, of an external C function."""
from __future__ import annotations

from typing import Mapping, Sequence

from adc.ir.ops.record import define, example, require, same_types
from adc.ir.types import Dim, SymDim, TensorType


def bind_dims(params: Sequence[TensorType], args: Sequence[TensorType]) -> dict[str, Dim]:
    """Bind a callee's dimension symbols to the caller's dimensions, checking consistency."""
    require(len(params) == len(args), f"expected {len(params)} arguments, got {len(args)}")
    env: dict[str, Dim] = {}
    for i, (p, a) in enumerate(zip(params, args)):
        require(p.dtype == a.dtype and p.rank == a.rank, f"argument {i + 1}: expected {p}, got {a}")
        for pd, ad in zip(p.shape, a.shape):
            if isinstance(pd, SymDim) and pd.is_symbol:
                (name,) = pd.symbols
                require(env.setdefault(name, ad) == ad,
                        f"argument {i + 1}: dimension {name} is {env[name]} elsewhere but {ad} here")
            else:
                require(pd == ad, f"argument {i + 1}: expected {p}, got {a}")
    return env


def substitute(d: Dim, env: Mapping[str, Dim]) -> Dim:
    return d.evaluate(env) if isinstance(d, SymDim) else d


def _call_rule(types, attrs, funcs):
    callee = funcs.get(attrs["callee"])
    require(callee is not None, f"unknown function @{attrs['callee']}")
    env = bind_dims(callee.param_types, types)
    return tuple(TensorType(t.dtype, tuple(substitute(d, env) for d in t.shape)) for t in callee.result_types)


define("call", "call another function of the module; its dimension symbols bind to the arguments'",
       "func @sq(%x: f32[N]) -> f32[N] {\n  %0 = mul %x, %x : f32[N]\n  return %0\n}\n\n"
       "func @example(%y: f32[M]) -> f32[M] {\n  %0 = call %y {callee = @sq} : f32[M]\n  return %0\n}\n",
       _call_rule, None, ("callee",), traits=("calls",))


def callee(funcs, attrs, key: str):
    """The function of the module that attribute `key` names (a callee or a region)."""
    func = funcs.get(attrs[key])
    require(func is not None, f"unknown function @{attrs[key]}")
    return func


def _custom_gradient_rule(types, attrs, funcs):
    # results: the forward's (k primal results, then the values saved for the backward);
    # the backward takes (inputs..., saved..., cotangents of the k results...) -> one cotangent per input
    forward, backward, k = callee(funcs, attrs, "forward"), callee(funcs, attrs, "backward"), attrs["results"]
    results = forward.result_types
    require(isinstance(k, int) and 1 <= k <= len(results), f"`results` must be in 1..{len(results)}, got {k!r}")
    expected = forward.param_types + results[k:] + results[:k]
    require(backward.param_types == expected and backward.result_types == forward.param_types,
            f"@{backward.name} must map ({', '.join(map(str, expected))}) to "
             f"({', '.join(map(str, forward.param_types))}), got {backward.signature()}")
    return _call_rule(types, {"callee": attrs["forward"]}, funcs)


define("custom_gradient", "the results of `forward`, differentiated by `backward` instead of `forward`'s ops",
       "func @round_fwd(%x: f32) -> f32 {\n  %0 = round %x : f32\n  return %0\n}\n\n"
       "func @round_bwd(%x: f32, %dy: f32) -> f32 {\n  return %dy\n}\n\n"
       "func @example(%y: f32) -> f32 {\n"
       "  %0 = custom_gradient %y {backward = @round_bwd, forward = @round_fwd, results = 1} : f32\n  return %0\n}\n",
       _custom_gradient_rule, None, ("backward", "forward", "results"), traits=("calls",))


def _extern_call_rule(types, attrs, funcs):
    # elementwise C function `symbol` of operands of one float type, defined in the shared object
    # `library` ("" for libm and the process); `gradient` is [] or [@g] with
    # g(x_1..x_n, ct) -> (dx_1..dx_n) on scalars of that dtype
    require(isinstance(attrs["symbol"], str) and attrs["symbol"].isidentifier(),
            f"`symbol` must be a C identifier, got {attrs['symbol']!r}")
    require(isinstance(attrs["library"], str), f"`library` must be a string, got {attrs['library']!r}")
    require(len(types) >= 1, "expected at least one operand")
    t = same_types(types)
    require(t.dtype.is_float, f"expected float operands, got {t}")
    gradient = tuple(attrs["gradient"])
    require(len(gradient) <= 1, f"`gradient` names at most one function, got {len(gradient)}")
    for name in gradient:
        g = callee(funcs, {"gradient": name}, "gradient")
        scalar = TensorType(t.dtype)
        require(g.param_types == (scalar,) * (len(types) + 1) and g.result_types == (scalar,) * len(types),
                f"@{name} must map {len(types) + 1} {t.dtype} scalars to {len(types)}, got {g.signature()}")
    return (t,)


define("extern_call", "the C function `symbol` of shared object `library` (\"\": libm or the process) applied "
       "elementwise; `gradient` is its VJP, when one is attached",
       example("%x: f64[N]", '  %0 = extern_call %x {gradient = [], library = "", symbol = "erf"} : f64[N]\n'
               '  return %0', "f64[N]"),
       _extern_call_rule, None, ("gradient", "library", "symbol"), traits=("elementwise",))

