"""Every builtin and operator of the language, compiled, against NumPy in float64.

One case per line: kernel parameters, result type, adc expression, the NumPy
reference, and the input range. All cases of a dtype compile into one module,
then run on random inputs for several sizes, zero-size dimensions included.
"""
import numpy as np
import pytest
import scipy.special

import adc
from tests.support.accuracy import ulp_error

X, XY, XV = "x: T[M, N]", "x: T[M, N], y: T[M, N]", "x: T[M, N], v: T[N]"
MN = "T[M, N]"
SIZES = [(3, 4), (1, 1), (0, 4), (3, 0), (17, 33)]
WIDE, POS, UNIT = (-20, 20), (0.01, 50), (-0.9, 0.9)

CASES = [
    # name, params, result, expression, numpy reference, input range, smallest (M, N)
    ("neg", X, MN, "-x", lambda x: -x, WIDE),
    ("sin", X, MN, "sin(x)", np.sin, WIDE), ("cos", X, MN, "cos(x)", np.cos, WIDE),
    ("tan", X, MN, "tan(x)", np.tan, (-1.4, 1.4)),
    ("exp", X, MN, "exp(x)", np.exp, WIDE), ("log", X, MN, "log(x)", np.log, POS),
    ("log1p", X, MN, "log1p(x)", np.log1p, UNIT), ("expm1", X, MN, "expm1(x)", np.expm1, WIDE),
    ("sqrt", X, MN, "sqrt(x)", np.sqrt, POS), ("rsqrt", X, MN, "rsqrt(x)", lambda x: 1 / np.sqrt(x), POS),
    ("abs", X, MN, "abs(x)", np.abs, WIDE), ("sign", X, MN, "sign(x)", np.sign, WIDE),
    ("tanh", X, MN, "tanh(x)", np.tanh, WIDE), ("sigmoid", X, MN, "sigmoid(x)", lambda x: 1 / (1 + np.exp(-x)), WIDE),
    ("relu", X, MN, "relu(x)", lambda x: np.maximum(x, 0), WIDE),
    ("elu", X, MN, "elu(x)", lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))), WIDE),
    ("softplus", X, MN, "softplus(x)", lambda x: np.logaddexp(x, 0), WIDE),
    ("round", X, MN, "round(x)", np.round, WIDE), ("floor", X, MN, "floor(x)", np.floor, WIDE),
    ("log2", X, MN, "log2(x)", np.log2, POS), ("log10", X, MN, "log10(x)", np.log10, POS),
    ("exp2", X, MN, "exp2(x)", np.exp2, WIDE), ("cbrt", X, MN, "cbrt(x)", np.cbrt, WIDE),
    ("sinh", X, MN, "sinh(x)", np.sinh, WIDE), ("cosh", X, MN, "cosh(x)", np.cosh, WIDE),
    ("asinh", X, MN, "asinh(x)", np.arcsinh, WIDE), ("acosh", X, MN, "acosh(x)", np.arccosh, (1, 50)),
    ("atanh", X, MN, "atanh(x)", np.arctanh, UNIT), ("erf", X, MN, "erf(x)", scipy.special.erf, (-5, 5)),
    ("erfc", X, MN, "erfc(x)", scipy.special.erfc, (-5, 9)),
    ("lgamma", X, MN, "lgamma(x)", scipy.special.gammaln, (0.01, 50)),
    ("lgamma_reflected", X, MN, "lgamma(x)", scipy.special.gammaln, (-0.99, -0.01)),
    ("digamma", X, MN, "digamma(x)", scipy.special.psi, (-0.99, 50)),
    ("atan", X, MN, "atan(x)", np.arctan, WIDE), ("asin", X, MN, "asin(x)", np.arcsin, (-1, 1)),
    ("acos", X, MN, "acos(x)", np.arccos, (-1, 1)),
    ("atan2", XV, MN, "atan2(x, v)", np.arctan2, (-3, 3)), ("hypot", XV, MN, "hypot(v, x)", lambda x, v: np.hypot(v, x), WIDE),
    ("pow_builtin", XV, MN, "pow(abs(x), v)", lambda x, v: np.abs(x) ** v, (-3, 3)),
    ("add", XV, MN, "x + v", np.add, WIDE), ("sub", XV, MN, "x - v", np.subtract, WIDE),
    ("mul", XV, MN, "v * x", np.multiply, WIDE), ("div", XV, MN, "x / (abs(v) + 1.0)", lambda x, v: x / (np.abs(v) + 1), WIDE),
    ("pow", XV, MN, "abs(x) ** v", lambda x, v: np.abs(x) ** v, (-3, 3)),
    ("square", X, MN, "x ** 2", np.square, WIDE),
    ("scalar_ops", X, MN, "2.0 * x - 1 + x / 4.0", lambda x: 2 * x - 1 + x / 4, WIDE),
    ("minimum", XY, MN, "minimum(x, y)", np.minimum, WIDE), ("maximum", XV, MN, "maximum(x, v)", np.maximum, WIDE),
    ("lt", XV, "bool[M, N]", "x < v", np.less, WIDE), ("le", XY, "bool[M, N]", "x <= y", np.less_equal, (-2, 2)),
    ("gt", XV, "bool[M, N]", "x > v", np.greater, WIDE), ("ge", X, "bool[M, N]", "x >= 0.5", lambda x: x >= 0.5, (-2, 2)),
    ("eq", XY, "bool[M, N]", "round(x) == round(y)", lambda x, y: np.round(x) == np.round(y), (-2, 2)),
    ("ne", XY, "bool[M, N]", "round(x) != round(y)", lambda x, y: np.round(x) != np.round(y), (-2, 2)),
    ("where", XV, MN, "where(x > v, x, v)", lambda x, v: np.where(x > v, x, v), WIDE),
    ("clip", X, MN, "clip(x, -0.5, 0.5)", lambda x: np.clip(x, -0.5, 0.5), (-2, 2)),
    ("norm", X, "T", "norm(x)", np.linalg.norm, WIDE),
    ("norm_axis", X, "T[M]", "norm(x, axis=1)", lambda x: np.linalg.norm(x, axis=1), WIDE),
    ("clip_by_norm", X, MN, "clip_by_norm(x, 1.0)",
     lambda x: x * 1.0 / max(np.sqrt(np.sum(x * x)), 1.0), (-2, 2)),
    ("sum", X, "T", "sum(x)", np.sum, WIDE), ("sum0", X, "T[N]", "sum(x, axis=0)", lambda x: x.sum(0), WIDE),
    ("sum_keep", X, "T[M, 1]", "sum(x, axis=-1, keepdims=True)", lambda x: x.sum(-1, keepdims=True), WIDE),
    ("mean", X, "T[M]", "mean(x, axis=1)", lambda x: x.mean(1) if x.shape[1] else np.full(x.shape[0], np.nan), WIDE, (0, 1)),
    ("mean_all", X, "T", "mean(x)", np.mean, WIDE, (1, 1)),
    ("max", X, "T[N]", "max(x, axis=0)", lambda x: np.max(x, 0, initial=-np.inf), WIDE),
    ("min", X, "T[M]", "min(x, axis=1)", lambda x: np.min(x, 1, initial=np.inf), WIDE),
    ("prod", X, "T[M]", "prod(x, axis=1)", lambda x: np.prod(x, 1), (0.5, 1.5)),
    ("max_all", X, "T", "max(x)", lambda x: np.max(x, initial=-np.inf), WIDE),
    ("transpose", X, "T[N, M]", "transpose(x)", np.transpose, WIDE),
    ("reshape", X, "T[M*N]", "reshape(x, [M * N])", np.ravel, WIDE),
    ("reshape_back", X, "T[N, M]", "reshape(transpose(x), [N, M]) * 2.0", lambda x: x.T * 2, WIDE),
    ("broadcast_to", "v: T[N]", MN.replace("M", "3"), "broadcast_to(v, [3, N])", lambda v: np.broadcast_to(v, (3,) + v.shape), WIDE),
    ("concat", XV, "T[M+1, N]", "concat([x, reshape(v, [1, N])], axis=0)", lambda x, v: np.concatenate([x, v[None]], 0), WIDE),
    ("stack", XY, "T[M, 2, N]", "stack([x, y], axis=1)", lambda x, y: np.stack([x, y], 1), WIDE),
    ("pad", X, "T[M+3, N+1]", "pad(x, [(1, 2), (0, 1)], value=0.5)",
     lambda x: np.pad(x, [(1, 2), (0, 1)], constant_values=0.5), WIDE),
    ("index_col", X, "T[M]", "x[:, 0]", lambda x: x[:, 0], WIDE, (0, 1)),
    ("slice_tail", X, "T[M-1, N]", "x[1:]", lambda x: x[1:], WIDE, (1, 0)),
    ("slice_head", X, "T[M, N-1]", "x[:, :-1]", lambda x: x[:, :-1], WIDE, (0, 1)),
    ("slice_last", X, "T[N]", "x[-1]", lambda x: x[-1], WIDE, (1, 0)),
    ("slice_step", "x: T[7, N]", "T[4, N]", "x[::2]", lambda x: x[::2], WIDE, (7, 0)),
    ("matmul", "x: T[M, N], z: T[N, 5]", "T[M, 5]", "x @ z", np.matmul, (-2, 2)),
    ("matvec", "x: T[M, N], v: T[N]", "T[M]", "x @ v", np.matmul, (-2, 2)),
    ("vecmat", "v: T[N], z: T[N, 5]", "T[5]", "v @ z", np.matmul, (-2, 2)),
    ("batched_matmul", "a: T[2, M, N], z: T[N, 3]", "T[2, M, 3]", "a @ z", np.matmul, (-2, 2)),
    ("zeros", X, MN, "zeros([M, N]) + x", lambda x: x, WIDE),
    ("ones", X, MN, "ones([M, N]) * x", lambda x: x, WIDE),
    ("full", X, MN, "full([M, N], 2.5) - x", lambda x: 2.5 - x, WIDE),
    ("linspace", "v: T[N]", "T[N]", "linspace(-1.0, 3.0, N) + v", lambda v: np.linspace(-1, 3, len(v)) + v, WIDE, (0, 2)),
    ("stop_gradient", X, MN, "stop_gradient(x) * 3.0", lambda x: 3 * x, WIDE),
    ("cast", "x: T[M, N]", "f64[M, N]", "f64(x)", lambda x: x, WIDE),
]


def _source(dtype: str) -> str:
    kernels = []
    for name, params, result, expr, *_ in CASES:
        sub = lambda s: s.replace("T[", f"{dtype}[").replace(": T,", f": {dtype},")
        result = dtype if result == "T" else sub(result)
        kernels.append(f"def case_{name}({sub(params)}) -> {result}:\n    return {expr}\n")
    return "\n".join(kernels)


@pytest.fixture(scope="module", params=["f32", "f64"])
def compiled(request):
    return request.param, adc.compile(_source(request.param), f"builtins_{request.param}.adc")


def _arguments(kernel, dtype, sizes, lo, hi, rng):
    env = {"M": sizes[0], "N": sizes[1]}
    args = []
    for t in kernel.signature.param_types:
        shape = tuple(d if isinstance(d, int) else env[str(d)] for d in t.shape)
        args.append(rng.uniform(lo, hi, shape).astype(dtype))
    return args


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_builtin_matches_numpy(compiled, case):
    dtype_name, module = compiled
    name, _, _, _, reference, (lo, hi), *least = case
    dtype = np.float32 if dtype_name == "f32" else np.float64
    kernel = getattr(module, f"case_{name}")
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    smallest = least[0] if least else (0, 0)
    for sizes in SIZES:
        if sizes[0] < smallest[0] or sizes[1] < smallest[1]:
            continue
        args = _arguments(kernel, dtype, sizes, lo, hi, rng)
        with np.errstate(all="ignore"):
            want = reference(*[a.astype(np.float64) for a in args])
        got = kernel(*args).numpy()
        assert got.shape == np.shape(want), (sizes, got.shape)
        if got.dtype == bool:
            np.testing.assert_array_equal(got, want)
        else:
            tol = 3e-6 if dtype is np.float32 else 1e-13
            np.testing.assert_allclose(got, want, rtol=tol * (1 + sizes[1]), atol=tol * (1 + sizes[1]), err_msg=str(sizes))


EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1e-30, -1e-30, 1e30, -1e30, np.inf, -np.inf, np.nan]
MATH = {"log2": np.log2, "log10": np.log10, "exp2": np.exp2, "cbrt": np.cbrt, "sinh": np.sinh, "cosh": np.cosh,
        "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "erf": scipy.special.erf,
        "erfc": scipy.special.erfc, "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos,
        "lgamma": np.vectorize(lambda v: np.inf if v <= 0 and v == np.floor(v) else scipy.special.gammaln(v)),
        "digamma": scipy.special.psi}   # lgamma: C99's, inf at -inf (SciPy's gammaln: -inf)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math_functions_at_the_edges(dtype):
    """NumPy's values at nan, +-inf, +-0 (signed), the ends of the domains and beyond, in every pair for
    atan2 and hypot: special results bit for bit, the others within 4 ulps."""
    name = "f32" if dtype is np.float32 else "f64"
    m = adc.compile("".join(f"def k_{f}(x: {name}[N]) -> {name}[N]:\n    return {f}(x)\n" for f in MATH)
                    + "".join(f"def k_{f}(x: {name}[N], y: {name}[N]) -> {name}[N]:\n    return {f}(x, y)\n"
                              for f in ("atan2", "hypot")), "edges.adc")
    x = np.array(EDGES, dtype)
    y, z = (a.ravel() for a in np.meshgrid(x, x))
    with np.errstate(all="ignore"):
        checks = [(f, (x,), ref(x.astype(np.float64)).astype(dtype)) for f, ref in MATH.items()]
        checks += [(f, (y, z), ref(y.astype(np.float64), z.astype(np.float64)).astype(dtype))
                   for f, ref in (("atan2", np.arctan2), ("hypot", np.hypot))]
    for f, args, want in checks:
        got = getattr(m, f"k_{f}")(*args).numpy()
        special = ~np.isfinite(want) | (want == 0) | (np.abs(want) == 1)
        np.testing.assert_array_equal(got[special], want[special], err_msg=f)
        signed = special & ~np.isnan(want)      # a nan's sign bit means nothing
        np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]), err_msg=f)
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps, atol=0, err_msg=f)


# max ulps from NumPy of the builtins composed of atan2 and sqrt (docs/language.md), (f32, f64)
COMPOSED_ULPS = {"atan": (1, 2), "asin": (2, 3), "acos": (1, 3)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inverse_trigonometric_ulps(dtype):
    """atan, asin, acos through atan2: dense over the domain, near +-1 and near 0."""
    name = "f32" if dtype is np.float32 else "f64"
    m = adc.compile("".join(f"def k_{f}(x: {name}[N]) -> {name}[N]:\n    return {f}(x)\n" for f in COMPOSED_ULPS),
                    "inverse.adc")
    rng = np.random.default_rng(4)
    ranges = [(-1, 1), (0.99, 1), (-1, -0.99), (-1e-3, 1e-3), (0.4, 0.6)]
    x = np.concatenate([rng.uniform(lo, hi, 100_000) for lo, hi in ranges]).astype(dtype)
    for f, bounds in COMPOSED_ULPS.items():
        arg = x * 30 if f == "atan" else x
        want = getattr(np, "arc" + f[1:])(arg.astype(np.float64)).astype(dtype)
        err = ulp_error(getattr(m, f"k_{f}")(arg).numpy(), want)
        assert err.max() <= bounds[dtype is np.float64], (f, arg[np.argmax(err)], err.max())


def test_float_sums_start_from_plus_zero_as_numpy():
    """An empty sum, or one of -0.0s, was -0.0 (the accumulator's identity) where NumPy gives 0.0."""
    m = adc.compile("def total(x: f64[N]) -> f64:\n    return sum(x)\n"
                    "def columns(x: f32[B, N]) -> f32[N]:\n    return sum(x, axis=0)\n"
                    "def rows(x: f32[B, N]) -> f32[B]:\n    return sum(x, axis=1)\n", "sums.adc")
    for got, want in [(m.total(np.zeros(0)).numpy(), np.sum(np.zeros(0))),
                      (m.total(np.array([-0.0])).numpy(), np.sum(np.array([-0.0]))),
                      (m.columns(np.zeros((0, 3), np.float32)).numpy(), np.zeros((0, 3), np.float32).sum(axis=0)),
                      (m.rows(np.zeros((2, 0), np.float32)).numpy(), np.zeros((2, 0), np.float32).sum(axis=1)),
                      (m.rows(np.full((2, 1), -0.0, np.float32)).numpy(), np.full((2, 1), -0.0, np.float32).sum(axis=1))]:
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_a_builtin_of_a_literal_takes_its_context_dtype():
    """sin(1.0) was an f32 constant, so `x + sin(1.0)` with x f64 was a dtype error."""
    m = adc.compile("def shifted(x: f64[N]) -> f64[N]:\n    return x + sin(1.0)\n"
                    "def scaled(x: f32[N]) -> f32[N]:\n    return x * sqrt(N)\n"
                    "def alone(x: f64) -> f64:\n    return exp(1.0)\n", "weak.adc")
    np.testing.assert_allclose(m.shifted(np.zeros(2)).numpy(), np.full(2, np.sin(1.0)), rtol=1e-15)   # f64
    np.testing.assert_array_equal(m.scaled(np.ones(4, np.float32)).numpy(), np.full(4, 2.0, np.float32))
    np.testing.assert_allclose(float(m.alone(0.0)), np.exp(1.0), rtol=1e-15)


@pytest.mark.parametrize("dtype, x", [
    ("f64", [1e16, 1e22, -1e300, 3e8, 2.0 ** 1000, np.finfo(np.float64).max]),
    ("f32", [3e8, -1e8, 1e22, 2.0 ** 100, np.finfo(np.float32).max]),
])
def test_trig_of_large_arguments_and_their_derivatives(dtype, x):
    """sin(1e16) was 0.7174 (NumPy: 0.7797): reducing mod pi/2 lost every bit from 1e16 (f64), 1e8 (f32) on."""
    m = adc.compile("".join(f"def {f}_of(x: {dtype}[N]) -> {dtype}[N]:\n    return {f}(x)\n"
                            f"def sum_{f}(x: {dtype}[N]) -> {dtype}:\n    return sum({f}(x))\n"
                            for f in ("sin", "cos", "tan")), "large.adc")
    x = np.array(x, np.float32 if dtype == "f32" else np.float64)
    rtol = 4 * np.finfo(x.dtype).eps
    wide = x.astype(np.float64)
    for name, want, derivative in [("sin", np.sin(wide), np.cos(wide)), ("cos", np.cos(wide), -np.sin(wide)),
                                   ("tan", np.tan(wide), 1 / np.cos(wide) ** 2)]:
        np.testing.assert_allclose(getattr(m, f"{name}_of")(x).numpy(), want, rtol=rtol, err_msg=name)
        gradient = adc.grad(getattr(m, f"sum_{name}"))(x)
        np.testing.assert_allclose(gradient.numpy(), derivative, rtol=rtol, err_msg=f"d{name}")
