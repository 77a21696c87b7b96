"""Every differentiable operator and builtin of the language as a one-line case, for the derivative
passes' tests against finite differences (reverse mode, forward mode, first and second order).

A case is parameters, result type, expression and the input domains, chosen away from kinks
(abs and relu at 0, ties of maximum); broadcasting a row, a column and a scalar:

    "div": ("x,y", "[3,4]", "x / y", "na")
    kernel_source("x,y", "[3,4]", "x / y")  ->  "def f(x: f64[3, 4], y: f64[4]) -> f64[3,4]:\\n    return x / y\\n"
    inputs("x,y", "na")                     ->  [normal f64[3, 4], f64[4] away from 0]
"""
import numpy as np

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
    "logaddexp": ("x,y", "[3,4]", "logaddexp(x, y)", "nn"),
    "logaddexp_column": ("x,c", "[3,4]", "logaddexp(c, 2.0 * x)", "nn"),
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


def kernel_source(params: str, result: str, expr: str) -> str:
    """The adc text of kernel `f` of a case: params named as in SHAPES, all float64."""
    args = ", ".join(f"{p}: {TYPES[p]}" for p in params.split(","))
    return f"def f({args}) -> f64{result}:\n    return {expr}\n"


def inputs(params: str, domains: str, seed: int = 1) -> list[np.ndarray]:
    """Arguments for the params of a case, each drawn from its domain."""
    rng = np.random.default_rng(seed)
    return [DOMAINS[d](rng, SHAPES[p]) for p, d in zip(params.split(","), domains)]
