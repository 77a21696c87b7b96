"""Every differentiable operator and builtin of the language, first and second order, against
central finite differences in float64 (tests/support/gradcheck.py), with broadcasting.

One line per case: parameters, result type, expression, and the input domains, chosen away
from kinks (abs and relu at 0, ties of maximum). The conventions at the kinks are pinned
in test_adjoint.py.
"""
import numpy as np
import pytest

from adc.errors import CompileError
from adc.frontend import compile_source
from tests.support.gradcheck import check_jacobian, check_jvp, check_vjp

# domains: n normal, p positive (0.5..2), a away from 0 (|x| in 0.2..2), f fractional (away from integers),
# u inside (-1, 1) (-0.9..0.9)
DOMAINS = {
    "n": lambda rng, s: rng.standard_normal(s),
    "p": lambda rng, s: rng.uniform(0.5, 2.0, s),
    "a": lambda rng, s: rng.choice([-1.0, 1.0], s) * rng.uniform(0.2, 2.0, s),
    "f": lambda rng, s: rng.integers(-3, 3, s) + rng.uniform(0.2, 0.8, s),
    "u": lambda rng, s: rng.uniform(-0.9, 0.9, s),
    # z: normal with exact zeros at every fifth position (where products' derivatives must not divide by x)
    "z": lambda rng, s: rng.standard_normal(s) * (np.arange(np.prod(s, dtype=int)).reshape(s) % 5 != 2),
}
SHAPES = {"x": (3, 4), "y": (4,), "s": (), "v": (4,), "m": (4, 2), "c": (3, 1), "b": (2, 3, 4), "e": (2, 4, 2)}
TYPES = {k: "f64" + (f"[{', '.join(map(str, s))}]" if s else "") for k, s in SHAPES.items()}

CASES = {
    # unary elementwise
    "neg": ("x", "[3,4]", "-x", "n"),
    "sin": ("x", "[3,4]", "sin(x)", "n"),
    "cos": ("x", "[3,4]", "cos(x)", "n"),
    "tan": ("x", "[3,4]", "tan(x)", "n"),
    "exp": ("x", "[3,4]", "exp(x)", "n"),
    "log": ("x", "[3,4]", "log(x)", "p"),
    "log1p": ("x", "[3,4]", "log1p(x)", "p"),
    "expm1": ("x", "[3,4]", "expm1(x)", "n"),
    "sqrt": ("x", "[3,4]", "sqrt(x)", "p"),
    "rsqrt": ("x", "[3,4]", "rsqrt(x)", "p"),
    "abs": ("x", "[3,4]", "abs(x)", "a"),
    "tanh": ("x", "[3,4]", "tanh(x)", "n"),
    "sigmoid": ("x", "[3,4]", "sigmoid(x)", "n"),
    "relu": ("x", "[3,4]", "relu(x)", "a"),
    "elu": ("x", "[3,4]", "elu(x)", "a"),
    "softplus": ("x", "[3,4]", "softplus(x)", "a"),
    "sign": ("x", "[3,4]", "x * sign(x)", "a"),
    "round": ("x", "[3,4]", "x * round(x)", "f"),
    "floor": ("x", "[3,4]", "x * floor(x)", "f"),
    "log2": ("x", "[3,4]", "log2(x)", "p"),
    "log10": ("x", "[3,4]", "log10(x)", "p"),
    "exp2": ("x", "[3,4]", "exp2(x)", "n"),
    "cbrt": ("x", "[3,4]", "cbrt(x)", "a"),
    "sinh": ("x", "[3,4]", "sinh(x)", "n"),
    "cosh": ("x", "[3,4]", "cosh(x)", "n"),
    "asinh": ("x", "[3,4]", "asinh(x)", "n"),
    "acosh": ("x", "[3,4]", "acosh(x + 1.5)", "p"),
    "atanh": ("x", "[3,4]", "atanh(x)", "u"),
    "erf": ("x", "[3,4]", "erf(x)", "n"),
    "erfc": ("x", "[3,4]", "erfc(x)", "n"),
    "atan": ("x", "[3,4]", "atan(x)", "n"),
    "asin": ("x", "[3,4]", "asin(x)", "u"),
    "acos": ("x", "[3,4]", "acos(x)", "u"),
    "lgamma": ("x", "[3,4]", "lgamma(x * 6.0)", "p"),
    "lgamma_reflected": ("x", "[3,4]", "lgamma(x)", "f"),
    # binary operators, broadcasting a row, a column and a scalar
    "add": ("x,y", "[3,4]", "x + y", "nn"),
    "sub": ("x,c", "[3,4]", "x - c", "nn"),
    "mul": ("x,s", "[3,4]", "x * s * x", "nn"),
    "div": ("x,y", "[3,4]", "x / y", "na"),
    "pow": ("x,y", "[3,4]", "x ** y", "pn"),
    "pow_const": ("x", "[3,4]", "x ** 3.0 + x ** 0.5", "p"),
    "pow_builtin": ("x,c", "[3,4]", "pow(x, c)", "pn"),
    "atan2": ("x,y", "[3,4]", "atan2(x, y)", "na"),
    "atan2_column": ("x,c", "[3,4]", "atan2(c, x)", "an"),
    "hypot": ("x,y", "[3,4]", "hypot(x, y)", "na"),
    "square": ("s", "", "s ** 2", "n"),
    "square_builtin": ("x", "[3,4]", "square(x)", "n"),
    "reciprocal": ("x", "[3,4]", "reciprocal(x)", "a"),
    "mod": ("x,y", "[3,4]", "x % y", "na"),
    "floor_div": ("x,y", "[3,4]", "x * (x // y)", "na"),
    "conditional": ("x,y", "[3,4]", "x * y if x > y else x - y", "nn"),
    "dot_t": ("x", "[4,3]", "(x * x).T", "n"),
    "minimum": ("x,y", "[3,4]", "minimum(x, y)", "nn"),
    "maximum": ("x,c", "[3,4]", "maximum(x, c)", "nn"),
    "where": ("x,y", "[3,4]", "where(x > y, x * y, x - y)", "nn"),
    "clip": ("x", "[3,4]", "clip(x, -0.5, 0.5)", "n"),
    "clip_tensor": ("x,y,s", "[3,4]", "clip(x, y - 2.0, s)", "nnn"),
    # norms and reductions
    "norm": ("x", "", "norm(x)", "n"),
    "norm_axis": ("x", "[3,1]", "norm(x, axis=1, keepdims=True)", "n"),
    "clip_by_norm_clips": ("x", "[3,4]", "clip_by_norm(x, 1.0)", "n"),
    "clip_by_norm_keeps": ("x", "[3,4]", "clip_by_norm(x, 100.0, axes=[1])", "n"),
    "sum": ("x", "[4]", "sum(x, axis=0)", "n"),
    "sum_all": ("b", "", "sum(b * b)", "n"),
    "mean": ("x", "[3]", "mean(x * x, axis=-1)", "n"),
    "max": ("x", "[3]", "max(x, axis=1)", "n"),
    "min": ("b", "[2,4]", "min(b, axis=1)", "n"),
    "prod": ("x", "[4]", "prod(x, axis=0)", "a"),
    # scans: cumsum is linear; cumprod's derivatives are exact at zeros (one, several, none per row)
    "cumsum": ("x", "[3,4]", "cumsum(x * x, axis=1)", "n"),
    "cumsum_flat": ("b", "[24]", "cumsum(b, exclusive=True, reverse=True) ** 2", "n"),
    "cumprod": ("x", "[3,4]", "cumprod(x, axis=0)", "a"),
    "cumprod_reverse": ("b", "[2,3,4]", "cumprod(b, axis=1, reverse=True, exclusive=True)", "a"),
    "cumprod_zeros": ("b", "[2,3,4]", "cumprod(b, axis=2)", "z"),
    "cumprod_zeros_reverse": ("x", "[3,4]", "cumprod(x, axis=1, exclusive=True, reverse=True)", "z"),
    # the softmax family; integer results (argmax, one_hot of it) carry no cotangent
    "logsumexp": ("x", "[3]", "logsumexp(x, axis=1)", "n"),
    "logsumexp_all": ("b", "[1,1,1]", "logsumexp(b * b, keepdims=True)", "n"),
    "softmax": ("x", "[3,4]", "softmax(x)", "n"),
    "softmax_axis0": ("x", "[3,4]", "softmax(x * x, axis=0)", "n"),
    "log_softmax": ("b", "[2,3,4]", "log_softmax(b, axis=-2)", "n"),
    "argmax_mask": ("x", "[3,4]", "x * one_hot(argmax(x, axis=1), 4, dtype=f64)", "n"),
    "argmin_count": ("x", "[3]", "x[:, 0] * f64(argmin(x, axis=1) + count_nonzero(x > 0.0, axis=1))", "n"),
    # structure
    "transpose": ("x", "[4,3]", "transpose(x) * 2.0", "n"),
    "transpose_perm": ("b", "[4,2,3]", "transpose(b, perm=[2, 0, 1]) ** 2", "n"),
    "reshape": ("x", "[2,6]", "reshape(x, [2, 6]) ** 2", "n"),
    "broadcast_to": ("y", "[3,4]", "broadcast_to(y, [3, 4]) * broadcast_to(y * y, [3, 4])", "n"),
    "concat": ("x,y", "[4,4]", "concat([x, reshape(y * y, [1, 4])], axis=0)", "nn"),
    "concat_axis1": ("x,c", "[3,5]", "concat([x * x, c], axis=1)", "nn"),
    "stack": ("y,v", "[2,4]", "stack([y * v, v], axis=0)", "nn"),
    "pad": ("x,s", "[5,7]", "pad(x * x, [[1, 1], [2, 1]], value=s)", "nn"),
    "slice": ("x", "[2,2]", "x[1:, 1:3] * x[:-1, :2]", "n"),
    "slice_step": ("x", "[2,2]", "x[::2, 1::2] ** 2", "n"),
    "slice_step3": ("b", "[2,2]", "b[:, 0, ::3] * b[1, :2, 0:3:2]", "n"),
    "index": ("x", "[4]", "x[0] * x[-1]", "n"),
    "matmul": ("x,m", "[3,2]", "x @ m", "nn"),
    "matmul_vector": ("x,y", "[3]", "x @ (y * y)", "nn"),
    "matmul_vector_left": ("y,m", "[2]", "y @ m", "nn"),
    "matmul_batched": ("b,e", "[2,3,2]", "b @ e", "nn"),
    "matmul_broadcast": ("b,m", "[2,3,2]", "b @ m", "nn"),
    # creation and constants in expressions
    "linspace": ("y", "[4]", "y * linspace(0.0, 1.0, 4)", "n"),
    "creation": ("x", "[3,4]", "x * ones([3, 4]) + full([3, 4], 2.0) * x + zeros([3, 4])", "n"),
}


def kernel(params: str, result: str, expr: str) -> str:
    args = ", ".join(f"{p}: {TYPES[p]}" for p in params.split(","))
    return f"def f({args}) -> f64{result}:\n    return {expr}\n"


def inputs(params: str, domains: str, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [DOMAINS[d](rng, SHAPES[p]) for p, d in zip(params.split(","), domains)]


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_first_and_second_order(case):
    params, result, expr, domains = CASES[case]
    module = compile_source(kernel(params, result, expr), f"{case}.adc")
    check_vjp(module, "f", inputs(params, domains), order=2, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("case", ["mul", "div", "pow", "atan2", "hypot", "concat", "slice_step", "matmul_vector", "max",
                                  "pad", "logsumexp", "softmax", "log_softmax", "cumsum_flat", "cumprod_zeros"])
def test_full_jacobian(case):
    params, result, expr, domains = CASES[case]
    module = compile_source(kernel(params, result, expr), f"{case}.adc")
    check_jacobian(module, "f", inputs(params, domains), rtol=1e-5, atol=1e-7)


def test_digamma_once_and_the_end_of_the_chain():
    # d lgamma = digamma, d digamma = trigamma, which has no derivative: a located error says so
    source = "def f(x: f64[N]) -> f64:\n    return sum(digamma(x))\n"
    check_vjp(compile_source(source, "psi.adc"), "f", [np.linspace(-2.7, 6.0, 7)], order=1, rtol=1e-5, atol=1e-7)
    with pytest.raises(CompileError, match="trigamma has no derivative"):
        check_vjp(compile_source(source, "psi.adc"), "f", [np.linspace(0.5, 6.0, 7)], order=2)


def test_symbolic_shapes():
    # symbolic dimensions: slices with symbolic bounds, broadcasting over B, a dim-valued mean
    source = ("def f(x: f64[B, N], w: f64[N]) -> f64[B, N-3]:\n"
              "    return x[:, 2:-1] * w[1:-2] + mean(x, axis=1, keepdims=True) * x[:, :-3] / N\n")
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((4, 7)), rng.standard_normal(7)]
    check_vjp(compile_source(source, "sym.adc"), "f", args, order=2, rtol=1e-5, atol=1e-7)


def test_slice_with_symbolic_padding():
    # x[1:3] of f64[N] scatters back with a symbolic high width N-3: zeros are concatenated
    source = "def f(x: f64[N]) -> f64[2]:\n    return x[1:3] * x[0:2]\n"
    check_vjp(compile_source(source, "slice.adc"), "f", [np.arange(1.0, 7.0)], order=2, rtol=1e-5, atol=1e-7)


def test_two_results_and_a_call():
    # calls are inlined first; each result gets its own cotangent param
    source = ("def g(a: f64[N]) -> f64[N]:\n    return sin(a) * a\n\n"
              "def f(x: f64[N], y: f64) -> (f64[N], f64):\n    return g(x) * y, sum(g(x))\n")
    check_vjp(compile_source(source, "two.adc"), "f", [np.linspace(-1, 1, 5), np.array(0.7)],
              order=2, rtol=1e-5, atol=1e-7)


def test_cumprod_with_several_zeros_in_a_row():
    # first order stays exact with any number of zeros along the scan; second order only with at
    # most one per row (docs/language.md): a later zero's cotangent is built from products holding
    # the first zero, so it does not vary with that zero
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4)) * np.array([[1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]])
    for flags in ("", ", exclusive=True", ", reverse=True"):
        module = compile_source(kernel("x", "[3,4]", f"cumprod(x, axis=1{flags})"), "zeros.adc")
        check_vjp(module, "f", [x], order=1, rtol=1e-5, atol=1e-7)
        check_jvp(module, "f", [x], rtol=1e-5, atol=1e-7)
