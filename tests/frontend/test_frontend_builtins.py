"""Every builtin and operator elaborates to verified IR of the declared type, and computes what NumPy does.

The oracle is NumPy; the IR runs on the reference interpreter (adc.ir.interp),
in float64 on M=3, N=4, so a wrong expansion (axis, broadcast, formula) fails.
"""
import re

import numpy as np
import pytest
import scipy.special

from adc.frontend import builtins, compile_source
from adc.ir.interp import run
from adc.ir.printer import format_module
from adc.ir.verify import verify
from tests.support.family_tables import lost_rows

X, XV, XY = "x: f64[M, N]", "x: f64[M, N], v: f64[N]", "x: f64[M, N], y: f64[M, N]"
MN = "f64[M, N]"

# name, parameters, result type, expression, NumPy reference
CASES = [
    ("sin", X, MN, "sin(x)", np.sin), ("cos", X, MN, "cos(x)", np.cos), ("tan", X, MN, "tan(x)", np.tan),
    ("exp", X, MN, "exp(x)", np.exp), ("log", X, MN, "log(abs(x) + 1.0)", lambda x: np.log(abs(x) + 1)),
    ("log1p", X, MN, "log1p(abs(x))", lambda x: np.log1p(abs(x))), ("expm1", X, MN, "expm1(x)", np.expm1),
    ("sqrt", X, MN, "sqrt(abs(x))", lambda x: np.sqrt(abs(x))),
    ("rsqrt", X, MN, "rsqrt(abs(x) + 1.0)", lambda x: 1 / np.sqrt(abs(x) + 1)),
    ("sign", X, MN, "sign(x)", np.sign), ("tanh", X, MN, "tanh(x)", np.tanh),
    ("sigmoid", X, MN, "sigmoid(x)", lambda x: 1 / (1 + np.exp(-x))),
    ("round", X, MN, "round(x * 3.0)", lambda x: np.round(x * 3)), ("floor", X, MN, "floor(x)", np.floor),
    ("relu", X, MN, "relu(x)", lambda x: np.maximum(x, 0)),
    ("log2", X, MN, "log2(abs(x))", lambda x: np.log2(abs(x))), ("log10", X, MN, "log10(abs(x))", lambda x: np.log10(abs(x))),
    ("exp2", X, MN, "exp2(x)", np.exp2), ("cbrt", X, MN, "cbrt(x)", np.cbrt), ("sinh", X, MN, "sinh(x)", np.sinh),
    ("cosh", X, MN, "cosh(x)", np.cosh), ("asinh", X, MN, "asinh(x)", np.arcsinh),
    ("acosh", X, MN, "acosh(abs(x) + 1.0)", lambda x: np.arccosh(abs(x) + 1)),
    ("atanh", X, MN, "atanh(tanh(x))", lambda x: x), ("erf", X, MN, "erf(x)", scipy.special.erf),
    ("erfc", X, MN, "erfc(x)", scipy.special.erfc), ("atan", X, MN, "atan(x)", np.arctan),
    ("asin", X, MN, "asin(tanh(x))", lambda x: np.arcsin(np.tanh(x))),
    ("acos", X, MN, "acos(tanh(x))", lambda x: np.arccos(np.tanh(x))),
    ("atan2", XV, MN, "atan2(v, x)", lambda x, v: np.arctan2(v, x)), ("hypot", XV, MN, "hypot(x, v)", np.hypot),
    ("pow", XV, MN, "pow(abs(x), v)", lambda x, v: abs(x) ** v),
    ("lgamma", X, MN, "lgamma(x)", scipy.special.gammaln), ("digamma", X, MN, "digamma(x)", scipy.special.psi),
    ("elu", X, MN, "elu(x)", lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0)))),
    ("softplus", X, MN, "softplus(x)", lambda x: np.logaddexp(x, 0)),
    ("minimum", XV, MN, "minimum(x, v)", np.minimum), ("maximum", XV, MN, "maximum(v, x)", lambda x, v: np.maximum(v, x)),
    ("where", XV, MN, "where(x > v, x, 0.5)", lambda x, v: np.where(x > v, x, 0.5)),
    ("clip", X, MN, "clip(x, -0.5, 0.5)", lambda x: np.clip(x, -0.5, 0.5)),
    ("stop_gradient", X, MN, "stop_gradient(x) * 3", lambda x: 3 * x),
    ("sum_all", X, "f64", "sum(x)", np.sum),
    ("sum_axis_none", X, "f64[1, 1]", "sum(x, axis=None, keepdims=True)", lambda x: x.sum(None, keepdims=True)),
    ("transpose_perm_none", X, "f64[N, M]", "transpose(x, perm=None)", np.transpose),
    ("sum_neg_axis", X, "f64[M]", "sum(x, axis=-1)", lambda x: x.sum(-1)),
    ("sum_axes_keep", X, "f64[1, 1]", "sum(x, axis=[0, 1], keepdims=True)", lambda x: x.sum((0, 1), keepdims=True)),
    ("mean_axis0", X, "f64[N]", "mean(x, axis=0)", lambda x: x.mean(0)),
    ("mean_keep", X, "f64[M, 1]", "mean(x, axis=(-1,), keepdims=True)", lambda x: x.mean(-1, keepdims=True)),
    ("max", X, "f64[N]", "max(x, axis=0)", lambda x: x.max(0)), ("min", X, "f64", "min(x)", np.min),
    ("prod", X, "f64[M]", "prod(x, axis=1)", lambda x: x.prod(1)),
    ("norm", X, "f64", "norm(x)", np.linalg.norm),
    ("norm_keep", X, "f64[M, 1]", "norm(x, axis=1, keepdims=True)", lambda x: np.linalg.norm(x, axis=1, keepdims=True)),
    ("clip_by_norm", X, MN, "clip_by_norm(x, 0.5)", lambda x: x * 0.5 / max(np.sqrt((x * x).sum()), 0.5)),
    ("clip_by_norm_rows", X, MN, "clip_by_norm(x, 1.0, axes=[1])",
     lambda x: x / np.maximum(np.sqrt((x * x).sum(1, keepdims=True)), 1.0)),
    ("transpose", X, "f64[N, M]", "transpose(x)", np.transpose),
    ("transpose_perm", "x: f64[2, M, N]", "f64[N, 2, M]", "transpose(x, perm=[2, 0, 1])", lambda x: x.transpose(2, 0, 1)),
    ("reshape", X, "f64[M*N]", "reshape(x, [M * N])", np.ravel),
    ("reshape_infer", X, "f64[N, M]", "reshape(x, [N, -1])", lambda x: x.reshape(x.shape[1], -1)),
    ("broadcast_to", "v: f64[N]", "f64[2, N]", "broadcast_to(v, [2, N])", lambda v: np.broadcast_to(v, (2,) + v.shape)),
    ("concat", XV, "f64[M+1, N]", "concat([x, reshape(v, [1, N])])", lambda x, v: np.concatenate([x, v[None]])),
    ("concat_neg", XY, "f64[M, 2*N]", "concat([x, y], axis=-1)", lambda x, y: np.concatenate([x, y], -1)),
    ("stack", XY, "f64[M, 2, N]", "stack([x, y], axis=1)", lambda x, y: np.stack([x, y], 1)),
    # the -1 size divides by a dimension with a coefficient (3*M was "not a multiple" of 3*M)
    ("reshape_infer_3m", "x: f64[3, M]", "f64[1, 3, M]", "reshape(x, [-1, 3, M])", lambda x: x.reshape(1, 3, -1)),
    ("reshape_infer_half", "x: f64[M, 4]", "f64[M, 2, 2]", "reshape(x, [M, -1, 2])", lambda x: x.reshape(len(x), 2, 2)),
    ("pad", X, "f64[M+3, N+1]", "pad(x, [(1, 2), (0, 1)], value=0.5)",
     lambda x: np.pad(x, [(1, 2), (0, 1)], constant_values=0.5)),
    # a bool tensor pads with False by default (it was "cannot use 0 as a bool value")
    ("pad_bool", X, "bool[M, N+2]", "pad(x > 0.0, [[0, 0], [1, 1]])", lambda x: np.pad(x > 0, [(0, 0), (1, 1)])),
    ("matmul", "x: f64[M, N], z: f64[N, 2]", "f64[M, 2]", "matmul(x, z)", np.matmul),
    ("matvec", "x: f64[M, N], v: f64[N]", "f64[M]", "x @ v", np.matmul),
    ("vecvec", "v: f64[N], w: f64[N]", "f64", "v @ w", np.matmul),
    ("batched", "a: f64[2, M, N], z: f64[N, 3]", "f64[2, M, 3]", "a @ z", np.matmul),
    ("zeros", X, MN, "zeros([M, N]) + x", lambda x: x),
    ("ones_f64", X, MN, "ones([M, N], dtype=f64) * x", lambda x: x),
    ("full", X, MN, "full([M, N], 2.5) - x", lambda x: 2.5 - x),
    ("linspace", "v: f64[N]", "f64[N]", "linspace(-1.0, 3.0, N) + v", lambda v: np.linspace(-1, 3, len(v)) + v),
    ("linspace_static", X, "f64[5]", "linspace(0.0, 1.0, 5, dtype=f64)", lambda x: np.linspace(0, 1, 5)),
    ("linspace_one", X, "f64[1]", "linspace(2.0, 1.0, 1, dtype=f64)", lambda x: np.linspace(2, 1, 1)),
    ("casts", X, "f64[M, N]", "f64(f32(x)) - f64(i32(x))",
     lambda x: x.astype(np.float32).astype(np.float64) - np.trunc(x)),
    ("power", X, MN, "abs(x) ** 1.5 + x ** 2", lambda x: abs(x) ** 1.5 + x ** 2),
    ("precedence", X, MN, "-x ** 2 + 2 * x / 4 - +x", lambda x: -x ** 2 + 2 * x / 4 - x),
    ("weak_literals", X, MN, "2 * x - 1 + x / 4.0 + N", lambda x: 2 * x - 1 + x / 4 + x.shape[1]),
    # arithmetic of dimensions, literals and creations stays weak (these were f32 and a dtype mismatch)
    ("weak_dimension_product", X, MN, "x / (N * 0.5)", lambda x: x / (x.shape[1] * 0.5)),
    ("weak_creation_sum", X, MN, "x * (zeros([M, N]) + 1) - ones([M, N])", lambda x: x - 1),
    ("weak_negated_creation", X, MN, "x * -ones([M, N])", lambda x: -x),
    ("compare", XV, "bool[M, N]", "x >= v", np.greater_equal),
    ("broadcast_col", "x: f64[M, N], c: f64[M, 1]", MN, "x * c", np.multiply),
    ("index", X, "f64[M]", "x[:, -1]", lambda x: x[:, -1]),
    ("slices", X, "f64[M-1, N-2]", "x[1:, 1:-1]", lambda x: x[1:, 1:-1]),
    ("step", "x: f64[7, N]", "f64[3, N]", "x[1::2]", lambda x: x[1::2]),
    ("clamped", "x: f64[5, N]", "f64[2, N]", "x[3:10]", lambda x: x[3:10]),
    ("scalar_index", "x: f64[5, N]", "f64", "x[2, 1]", lambda x: x[2, 1]),
    ("return_literal", X, MN, "0.5", lambda x: np.full(x.shape, 0.5)),
]

SIZES = {"M": 3, "N": 4}


def _inputs(params: str, rng):
    arrays = []
    for dims in re.findall(r"\w+: \w+(?:\[([^]]*)\])?", params):
        dims = dims.split(", ") if dims else []
        shape = tuple(int(d) if d.isdigit() else SIZES[d] for d in dims)
        arrays.append(rng.uniform(-2, 2, shape))
    return arrays


@pytest.mark.parametrize("name, params, result, expr, reference", CASES, ids=[c[0] for c in CASES])
def test_builtin_elaborates_and_computes(name, params, result, expr, reference):
    source = f"def k({params}) -> {result}:\n    return {expr}\n"
    module = compile_source(source, f"{name}.adc")
    verify(module, require_locations=True)
    func = module["k"]
    assert str(func.result_types[0]) == result.replace(" ", "")
    args = _inputs(params, np.random.default_rng(len(name)))
    (got,) = run(module, "k", *args)
    np.testing.assert_allclose(got, reference(*args), rtol=1e-6, atol=1e-9, err_msg=format_module(module))


def test_the_table_holds_every_familys_builtins():
    assert not lost_rows(builtins, "builtin_rules"), "builtins defined by two families, or a builtin lost"


def test_literal_square_is_a_multiplication():
    module = compile_source("def k(x: f32[N]) -> f32[N]:\n    return x ** 2\n")
    assert [op.name for op in module["k"].ops] == ["mul"]


def test_literal_defaults_to_f32_and_adapts_to_f64():
    module = compile_source("def k(x: f64[N]) -> f64[N]:\n    y = 0.5\n    return x + y\n")
    constant = module["k"].ops[0]
    assert constant.name == "constant" and str(constant.attrs["dtype"]) == "f64"


def test_kernel_calls_in_any_order_with_tuples_and_keywords():
    source = ("def f(x: f32[N]) -> f32:\n    a, b = split(x=x, k=2.0)\n    return sum(a) + sum(b)\n\n"
              "def split(x: f32[N], k: f32) -> (f32[N], f32[N-1]):\n    return x * k, x[1:]\n")
    module = compile_source(source)
    assert list(module.funcs) == ["f", "split"]
    verify(module)
    x = np.arange(1, 5, dtype=np.float32)
    (got,) = run(module, "f", x)
    np.testing.assert_allclose(got, np.sum(x * 2.0) + np.sum(x[1:]))
