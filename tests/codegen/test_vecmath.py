"""vecmath against NumPy: ulp error over wide and critical ranges, special values bit-exact, vectorization.

The oracle is NumPy in float64 on the same inputs, rounded to the tested type
(for f64 the oracle's own error, <= 1 ulp, is part of the bound); for erf and erfc,
80-bit mpmath. Where NumPy's
sin and cos are themselves wrong (the floats nearest to multiples of pi/2, where
the C library's cos can be off by 10^5 ulp), the oracle is 3000-bit mpmath,
written down as literals.
"""
import re

import llvmlite.ir as ir
import numpy as np
import mpmath
import pytest

from adc.codegen.lowering import vecmath
from adc.ir.interp import eval_rules
from tests.codegen.llvm_harness import compile_loop
from tests.support.accuracy import ulp_error

F32, F64 = np.float32, np.float64
INF, NAN = np.inf, np.nan


def _mpmath(fn, clip=np.inf):
    """fn in mpmath (80 bits in `oracle`), rounded to f64: SciPy's erf is 2 ulp off, its erfc 0 from 26.6 on.
    Arguments beyond +-clip (erf, erfc: 1000, where they are constant and mpmath's erfc overflows) are clipped."""
    return np.frompyfunc(lambda v: float(fn(min(max(v, -clip), clip))), 1, 1)


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x < 0, e / (1 + e), 1 / (1 + e))


ORACLES = {"exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "sin": np.sin,
           "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "sigmoid": _sigmoid, "sqrt": np.sqrt,
           "rsqrt": lambda x: 1 / np.sqrt(x), "abs": np.abs, "sign": np.sign, "round": np.round,
           "floor": np.floor, "pow": np.power, "log2": np.log2, "log10": np.log10, "exp2": np.exp2,
           "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
           "cbrt": np.cbrt, "erf": _mpmath(mpmath.erf, 1e3), "erfc": _mpmath(mpmath.erfc, 1e3), "atan2": np.arctan2,
           "hypot": np.hypot}

# max ulp error asserted, as documented in each emitter's docstring
BOUNDS = {
    "exp": (1, 1), "log": (1, 1), "log1p": (2, 2), "expm1": (1, 2), "sin": (1, 1), "cos": (1, 1),
    "tan": (1, 3), "tanh": (1, 2), "sigmoid": (2, 2), "sqrt": (0, 0), "rsqrt": (1, 1),
    "abs": (0, 0), "sign": (0, 0), "round": (0, 0), "floor": (0, 0),
    "log2": (1, 1), "log10": (1, 2), "exp2": (1, 1), "sinh": (1, 3), "cosh": (1, 2), "asinh": (1, 3),
    "acosh": (1, 3), "atanh": (1, 2), "cbrt": (1, 3), "erf": (1, 1), "erfc": (1, 2),
}
BINARY_BOUNDS = {"atan2": (1, 2), "hypot": (1, 1)}

# dense ranges near each function's critical points, per dtype: (lo, hi)
CRITICAL = {
    "exp": {F32: [(-1e-3, 1e-3), (80, 90), (-105, -85)], F64: [(-1e-3, 1e-3), (700, 710), (-746, -700)]},
    "log": {F32: [(0.9, 1.1), (0, 2e-38), (3e38, 3.4e38)], F64: [(0.9, 1.1), (0, 3e-308), (1e308, 1.7e308)]},
    "log1p": {F32: [(-1, -0.99), (-1e-3, 1e-3), (0.4, 0.6)], F64: [(-1, -0.99), (-1e-3, 1e-3), (0.4, 0.6)]},
    "expm1": {F32: [(-1e-3, 1e-3), (-0.7, 0.7), (-30, -10), (80, 90)],
              F64: [(-1e-3, 1e-3), (-0.7, 0.7), (-50, -30), (700, 710)]},
    "sin": {F32: [(-7, 7), (2**17 - 50, 2**17 + 50)], F64: [(-7, 7), (2**40 - 1e4, 2**40 + 1e4)]},
    "cos": {F32: [(-7, 7), (2**17 - 50, 2**17 + 50)], F64: [(-7, 7), (2**40 - 1e4, 2**40 + 1e4)]},
    "tan": {F32: [(-7, 7), (2**17 - 50, 2**17 + 50)], F64: [(-7, 7), (2**40 - 1e4, 2**40 + 1e4)]},
    "tanh": {F32: [(-1e-3, 1e-3), (0.55, 0.7), (5, 20)], F64: [(-1e-3, 1e-3), (0.55, 0.7), (15, 25)]},
    "sigmoid": {F32: [(-110, -80), (-2, 2), (10, 20)], F64: [(-750, -700), (-2, 2), (30, 40)]},
}
for _name in ("sqrt", "rsqrt", "abs", "sign", "round", "floor"):
    CRITICAL[_name] = {F32: [(-3, 3)], F64: [(-3, 3)]}
for _name, _ranges in {
    "log2": [(0.5, 2), (0, 1e-300)], "log10": [(0.5, 2), (1, 1e20)], "exp2": [(-2, 2), (1020, 1030), (-1080, -1020)],
    "sinh": [(-2, 2), (-1e-3, 1e-3), (0.9, 1.1), (700, 712)], "cosh": [(-2, 2), (-30, 30), (700, 712)],
    "asinh": [(-3, 3), (1.9, 2.1), (2**28 - 1e3, 2**28 + 1e3)], "acosh": [(1, 3), (1, 1.01), (1.9, 2.1), (-1, 5)],
    "atanh": [(-1, 1), (0.49, 0.51), (0.99, 1), (-1e-3, 1e-3)], "cbrt": [(-10, 10), (0, 1e-300)],
    "erf": [(-3, 3), (0.9, 1.1), (-1e-3, 1e-3), (4, 7)], "erfc": [(-3, 3), (0.4, 0.6), (-1.1, -0.9), (5, 27.3)],
}.items():
    # f32 ranges drop what is beyond its range; f32 overflows, underflows and limits come from the f64 ones
    CRITICAL[_name] = {F64: _ranges, F32: [(lo, hi) for lo, hi in _ranges if max(abs(lo), abs(hi)) < 100]
                       + {"exp2": [(120, 130), (-150, -120)], "sinh": [(85, 90)], "cosh": [(85, 90)],
                          "erfc": [(8, 10.1)]}.get(_name, [])}

_kernels = {}


def kernel(name, dtype):
    if (name, dtype) not in _kernels:
        arity = vecmath.vecmath_rules[name].arity
        _kernels[name, dtype] = compile_loop(lambda b, args: vecmath.call(b, name, args), dtype, arity)
    return _kernels[name, dtype]


def oracle(name, dtype, *args):
    with np.errstate(all="ignore"), mpmath.workprec(80):
        return np.asarray(ORACLES[name](*(a.astype(F64) for a in args))).astype(F64).astype(dtype)


def wide_inputs(name, dtype, rng, n=200_000):
    """Log-uniform magnitudes from the smallest denormal to the largest finite, both signs."""
    info = np.finfo(dtype)
    mag = np.exp(rng.uniform(np.log(float(info.smallest_subnormal)), np.log(float(info.max)), n))
    return (mag * rng.choice([-1.0, 1.0], n)).astype(dtype)


def critical_inputs(name, dtype, rng, n=50_000):
    return np.concatenate([rng.uniform(lo, hi, n).astype(dtype) for lo, hi in CRITICAL[name][dtype]])


def assert_ulps(name, dtype, x, bound):
    got = kernel(name, dtype)(x)
    err = ulp_error(got, oracle(name, dtype, x))
    worst = int(np.argmax(err))
    assert err[worst] <= bound, (f"{name}[{dtype.__name__}]({x[worst]!r}) = {got[worst]!r}, "
                                 f"{err[worst]} ulp from NumPy (bound {bound})")


DTYPES = [pytest.param(F32, id="f32"), pytest.param(F64, id="f64")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_ulp_error_wide_and_critical(name, dtype):
    rng = np.random.default_rng(sum(map(ord, name)))
    bound = BOUNDS[name][dtype is F64]
    exact = name in ("erf", "erfc")     # mpmath's oracle takes ~50 us a value: a tenth of the samples
    assert_ulps(name, dtype, wide_inputs(name, dtype, rng, 20_000 if exact else 200_000), bound)
    assert_ulps(name, dtype, critical_inputs(name, dtype, rng, 5_000 if exact else 50_000), bound)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_scaling_by_ldexp_is_bit_identical_to_two_factors(name, dtype):
    """Built for AVX-512 (vector_bits 512), exp's family applies 2^n with one ldexp (vscalef); the
    ulp tests above measure the two-factor scaling other targets use: both round once, so every
    function gives the same bits either way, on the wide and the critical inputs."""
    rng = np.random.default_rng(sum(map(ord, name)) + 1)
    x = np.concatenate([wide_inputs(name, dtype, rng, 20_000), critical_inputs(name, dtype, rng, 5_000)])
    one, two = (compile_loop(lambda b, args, bits=bits: vecmath.call(b, name, args, bits), dtype)
                for bits in (512, 256))
    np.testing.assert_array_equal(one(x).view(np.uint64 if dtype is F64 else np.uint32),
                                  two(x).view(np.uint64 if dtype is F64 else np.uint32))


def test_trig_near_multiples_of_half_pi():
    """The reduction keeps relative accuracy where the reduced argument nearly cancels."""
    k = np.arange(1, 6000)
    for dtype in (F32, F64):
        centers = (k * np.pi / 2).astype(dtype)
        x = np.concatenate([np.nextafter(centers, dtype(-INF)), centers, np.nextafter(centers, dtype(INF))])
        for name in ("sin", "cos"):
            assert_ulps(name, dtype, x, BOUNDS[name][dtype is F64])


# (x, sin x, cos x, tan x): floats closest to multiples of pi/2 (continued fractions of
# 2^e 2/pi), where x mod pi/2 is as small as 2^-61 (f64) and 2^-29 (f32); values from mpmath
HARD_TRIG = {
    F64: [(6381956970095103 * 2.0**797, 1.0, -4.687165924254628e-19, -2.133485385753704e+18),
          (5850965514341686 * 2.0**525, -1.0, 2.4853662876185346e-18, -4.0235517999167635e+17),
          (6366906923947931 * 2.0**194, -1.0, -4.796584752012325e-18, 2.0848167012590928e+17),
          (8160885118204141 * 2.0**809, 6.295961519809154e-18, -1.0, -6.295961519809154e-18),
          (6411027962775774 * 2.0**-47, 1.0, -6.189806365883577e-19, -1.6155594228467482e+18)],
    F32: [(16367173 * 2.0**72, 1.0, -1.6147697623480894e-09, -619283328.0),
          (10741887 * 2.0**11, 1.0, -2.0126460498204324e-09, -496858368.0),
          (16573937 * 2.0**-16, 1.0, -4.185706892201324e-09, -238908272.0),
          (10057457 * 2.0**62, 1.0, -6.467856916714254e-09, -154610720.0)],
}


@pytest.mark.parametrize("dtype", DTYPES)
def test_trig_at_the_hardest_arguments(dtype):
    """Exact reduction: the tiny remainders at the floats nearest to k pi/2, either sign."""
    table = np.array(HARD_TRIG[dtype])
    x = np.concatenate([table[:, 0], -table[:, 0]]).astype(dtype)
    for column, (name, parity) in enumerate([("sin", -1), ("cos", 1), ("tan", -1)], start=1):
        want = np.concatenate([table[:, column], parity * table[:, column]]).astype(dtype)
        err = ulp_error(kernel(name, dtype)(x), want)
        assert err.max() <= BOUNDS[name][dtype is F64], (name, x[err > BOUNDS[name][dtype is F64]])


@pytest.mark.parametrize("dtype", DTYPES)
def test_trig_at_large_arguments(dtype):
    """sin(1e16), cos(1e22), tan(1e300): a reduction that is not exact gives about +-0.72 there."""
    info = np.finfo(dtype)
    x = np.array([1e8, 3e8, 1e16, 1e22, 1e30, 1e38, 1e100, 1e300, float(info.max)], F64)
    x = x[x <= float(info.max)].astype(dtype)
    x = np.concatenate([x, -x, np.nextafter(x, dtype(0))])
    for name in ("sin", "cos", "tan"):
        assert_ulps(name, dtype, x, BOUNDS[name][dtype is F64])


# |x| below which the fast variants (vecmath.call_fast) are exact, as documented
FAST_LIMIT = {("sin", F32): 2.0**17, ("cos", F32): 2.0**17, ("tan", F32): 2.0**40,
              ("sin", F64): 2.0**40, ("cos", F64): 2.0**40, ("tan", F64): 2.0**40}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_fast_variant_equals_the_exact_function_in_its_range(name, dtype):
    """Bit for bit, so a loop nest's results do not depend on which variant ran."""
    fast = compile_loop(lambda b, args: vecmath.call_fast(b, name, args)[0], dtype)
    in_range = compile_loop(lambda b, args: b.uitofp(vecmath.call_fast(b, name, args)[1], args[0].type), dtype)
    limit = FAST_LIMIT[name, dtype]
    rng = np.random.default_rng(5)
    x = wide_inputs(name, dtype, rng, 50_000)
    near_limit = np.array([limit, np.nextafter(dtype(limit), dtype(0))], dtype)
    x = np.concatenate([x, critical_inputs(name, dtype, rng, 5_000), near_limit, -near_limit, special_inputs(dtype)])
    inside = ~(np.abs(x) >= limit)          # NaN counts as inside
    np.testing.assert_array_equal(in_range(x), inside.astype(dtype))
    ity = np.int32 if dtype is F32 else np.int64
    np.testing.assert_array_equal(fast(x[inside]).view(ity), kernel(name, dtype)(x[inside]).view(ity))


def special_inputs(dtype):
    info = np.finfo(dtype)
    tiny = info.smallest_subnormal
    return np.array([0.0, -0.0, INF, -INF, NAN, tiny, -tiny, 1.0, -1.0, info.max, -info.max,
                     info.smallest_normal, -info.smallest_normal, 0.5, -0.5, 2.5, -2.5], dtype)


SPECIAL_EXTRA = {
    "exp": {F32: [88.72, 88.73, 88.8, 89.0, -103.0, -104.0, -87.4, -100.0, 1000.0, -1000.0],
            F64: [709.78, 709.79, 710.0, -745.0, -745.2, -746.0, -708.5, -740.0, 1e4, -1e4]},
    "expm1": {F32: [88.72, 88.73, -17.0, -30.0, 1e-30, -1e-30], F64: [709.78, 709.79, -38.0, -50.0, 1e-300]},
    "log": {F32: [1e-45, 3e-39, 1e-40], F64: [5e-324, 1e-310, 2e-308]},
    "log1p": {F32: [-0.9999999, 1e-30, -1e-30, -2.0], F64: [-0.9999999999999999, 1e-300, -2.0]},
    "sigmoid": {F32: [-88.0, -100.0, -103.0, -104.0, 17.0, 20.0], F64: [-708.0, -740.0, -745.0, 37.0, 40.0]},
    "tanh": {F32: [9.0, 10.0, -20.0, 1e-30], F64: [19.0, 20.0, -40.0, 1e-300]},
    "cos": {F32: [92415.18]},   # 2 ulp when r + r^3 S(r^2) was rounded twice
    "exp2": {F32: [127.9, 128.0, -126.0, -149.0, -150.0, -149.5], F64: [1023.9, 1024.0, -1074.0, -1075.0, -1074.5]},
    "sinh": {F32: [89.4, 89.5, -89.5, 1e-30], F64: [710.47, 710.48, -710.5, 1e-300]},
    "cosh": {F32: [89.4, 89.5, -89.5], F64: [710.47, 710.48, -710.5]},
    "atanh": {F32: [1.0001, -1.5], F64: [1.0000000000000002, -1.5]},
    "acosh": {F32: [0.9999999, -1.0, 1e30], F64: [0.9999999999999999, -1.0, 1e300]},
    "asinh": {F32: [1e30, -3e38], F64: [1e300, -1.7e308]},
    "log2": {F32: [8.0, 1e-45, 0.125], F64: [8.0, 5e-324, 0.125]},
    "log10": {F32: [1000.0, 1e-45], F64: [1000.0, 5e-324, 1e22]},
    "cbrt": {F32: [27.0, -8.0, 1e-45], F64: [27.0, -8.0, 5e-324]},
    "erf": {F32: [4.0, 1e-30], F64: [6.0, 1e-300]},
    "erfc": {F32: [10.0, 10.1, -10.0], F64: [26.5, 27.2, 27.3, 28.0, -6.0]},
}

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_special_values_bit_exact(name, dtype):
    x = np.concatenate([special_inputs(dtype), np.array(SPECIAL_EXTRA.get(name, {}).get(dtype, []), dtype)])
    got, want = kernel(name, dtype)(x), oracle(name, dtype, x)
    err = ulp_error(got, want)
    bad = (is_exact_special(x, want) & (err > 0)) | (err > BOUNDS[name][dtype is F64])
    assert not bad.any(), f"{name}[{dtype.__name__}] at {x[bad]}: got {got[bad]}, NumPy {want[bad]}"


def is_exact_special(x, want):
    """Results that must match bit for bit: of non-finite x; inf, nan, signed zeros, x itself, denormals."""
    tiny = np.finfo(want.dtype).smallest_normal
    return ~np.isfinite(x) | ~np.isfinite(want) | (np.abs(want) <= tiny) | (want == x)


POW_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5, INF, -INF, NAN, 1e-40, 1e30]


@pytest.mark.parametrize("dtype", DTYPES)
def test_pow_special_values_bit_exact(dtype):
    base, expo = np.meshgrid(np.array(POW_SPECIALS, dtype), np.array(POW_SPECIALS, dtype))
    base, expo = base.ravel(), expo.ravel()
    got, want = kernel("pow", dtype)(base, expo), oracle("pow", dtype, base, expo)
    err = ulp_error(got, want)
    exact = ~np.isfinite(base) | ~np.isfinite(expo) | ~np.isfinite(want) | (want == 0) | (expo == 0) | (base == 1)
    bad = (exact & (err > 0)) | (err > 2)
    assert not bad.any(), (f"pow[{dtype.__name__}] at {list(zip(base[bad], expo[bad]))}: "
                           f"got {got[bad]}, NumPy {want[bad]}")


def test_pow_f32_accuracy():
    """f32 pow runs in f64, so even large |y log x| stays within 1 ulp, negative bases included."""
    rng = np.random.default_rng(2)
    x = np.exp(rng.uniform(-80, 80, 200_000)) * rng.choice([-1.0, 1.0], 200_000)
    y = np.where(rng.random(200_000) < 0.5, np.round(rng.uniform(-30, 30, 200_000)),
                 rng.uniform(-1, 1, 200_000))
    x, y = x.astype(F32), y.astype(F32)
    err = ulp_error(kernel("pow", F32)(x, y), oracle("pow", F32, x, y))
    assert err.max() <= 1


def test_pow_f64_accuracy():
    """f64 pow carries log|x| in double-double: <= 2 ulp up to overflow and down to denormals."""
    rng = np.random.default_rng(3)
    x = np.exp(rng.uniform(-700, 700, 200_000))
    y = np.where(rng.random(200_000) < 0.3, np.round(rng.uniform(-5, 5, 200_000)),
                 rng.uniform(-1.05, 1.05, 200_000))
    err = ulp_error(kernel("pow", F64)(x, y), oracle("pow", F64, x, y))
    assert err.max() <= 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY_BOUNDS))
def test_binary_ulp_error(name, dtype):
    """Pairs of wide magnitudes (every ratio, both signs), and of ordinary ones."""
    rng = np.random.default_rng(sum(map(ord, name)))
    x, y = wide_inputs(name, dtype, rng), wide_inputs(name, dtype, rng)
    near = rng.uniform(-3, 3, (2, 200_000)).astype(dtype)
    for a, b in ((x, y), (x, x * dtype(0.75)), tuple(near)):
        err = ulp_error(kernel(name, dtype)(a, b), oracle(name, dtype, a, b))
        worst = int(np.argmax(err))
        assert err[worst] <= BINARY_BOUNDS[name][dtype is F64], (name, a[worst], b[worst], err[worst])


BINARY_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-40, -1e30, INF, -INF, NAN]


def _logaddexp_exact(x, y):
    """log(e^x + e^y) to 80 bits (mpmath), as f64."""
    with mpmath.workprec(80):
        return np.array([float(mpmath.log(mpmath.exp(a) + mpmath.exp(b))) if np.isfinite(a) and np.isfinite(b)
                         else np.logaddexp(a, b) for a, b in zip(x.tolist(), y.tolist())])


@pytest.mark.parametrize("dtype", DTYPES)
def test_logaddexp_error_is_within_ulps_of_its_scale(dtype):
    """logaddexp = max + log1p(e^-|x - y|) within 2.5 ulps of max(|x|, |y|, ln 2): near a result of 0
    the sum cancels (NumPy's formula does too), so the bound is in the arguments' scale, not the result's."""
    rng = np.random.default_rng(7)
    for scale in (1.0, 30.0, 1e4):
        x, y = (rng.standard_normal(20_000) * scale).astype(dtype), (rng.standard_normal(20_000) * scale).astype(dtype)
        x[:2000] = -y[:2000] + rng.uniform(-1, 1, 2000).astype(dtype)     # results near 0
        got = kernel("logaddexp", dtype)(x, y).astype(F64)
        scale_ulp = np.spacing(np.maximum(np.maximum(np.abs(x), np.abs(y)), dtype(np.log(2))))
        err = np.abs(got - _logaddexp_exact(x.astype(F64), y.astype(F64))) / scale_ulp.astype(F64)
        worst = int(np.argmax(err))
        assert err[worst] <= 2.5, (dtype.__name__, x[worst], y[worst], err[worst])


@pytest.mark.parametrize("dtype", DTYPES)
def test_logaddexp_special_values_are_numpys(dtype):
    """Equal arguments give x + ln 2 (infinities of one sign themselves), a nan argument nan, one
    infinite argument the other's or inf; huge arguments never overflow."""
    y, x = (v.ravel() for v in np.meshgrid(np.array(BINARY_SPECIALS, dtype), np.array(BINARY_SPECIALS, dtype)))
    big = np.array([np.finfo(dtype).max, -np.finfo(dtype).max], dtype)
    x, y = np.concatenate([x, big, big]), np.concatenate([y, big, big[::-1]])
    got = kernel("logaddexp", dtype)(x, y)
    with np.errstate(all="ignore"):
        want = np.logaddexp(x.astype(F64), y.astype(F64)).astype(dtype)
        same = (got == want) | (np.isnan(got) & np.isnan(want)) | (np.abs(got - want) <= np.spacing(np.abs(want)))
    assert same.all(), f"at {list(zip(x[~same], y[~same]))}: got {got[~same]}, NumPy {want[~same]}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY_BOUNDS))
def test_binary_special_values_bit_exact(name, dtype):
    """C99's and NumPy's values at signed zeros and infinities: atan2(+-0, -0) = +-pi, hypot(inf, nan) = inf."""
    y, x = (v.ravel() for v in np.meshgrid(np.array(BINARY_SPECIALS, dtype), np.array(BINARY_SPECIALS, dtype)))
    got, want = kernel(name, dtype)(y, x), oracle(name, dtype, y, x)
    err = ulp_error(got, want)
    exact = ~np.isfinite(x) | ~np.isfinite(y) | (x == 0) | (y == 0)
    bad = (exact & (err > 0)) | (err > BINARY_BOUNDS[name][dtype is F64])
    assert not bad.any(), f"{name}[{dtype.__name__}] at {list(zip(y[bad], x[bad]))}: got {got[bad]}, NumPy {want[bad]}"


# x > 0: max ulps from mpmath, (f32, f64); below 0 the error is absolute near the roots
GAMMA_BOUNDS = {"lgamma": (1, 6), "digamma": (1, 4), "trigamma": (1, 4)}
GAMMA_ORACLES = {"lgamma": _mpmath(lambda v: mpmath.re(mpmath.loggamma(v))), "digamma": _mpmath(mpmath.digamma),
                 "trigamma": _mpmath(lambda v: mpmath.psi(1, v))}


def gamma_oracle(name, x, dtype=F64):
    with np.errstate(all="ignore"), mpmath.workprec(80):
        return np.asarray(GAMMA_ORACLES[name](x.astype(F64))).astype(F64).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(GAMMA_BOUNDS))
def test_gamma_family_above_zero(name, dtype):
    """Every magnitude, and dense near 0, the roots 1 and 2 of lgamma and 1.4616 of digamma."""
    rng = np.random.default_rng(sum(map(ord, name)))
    info = np.finfo(dtype)
    # mpmath's oracle is slow (trigamma's most): a few thousand values per region
    wide = np.minimum(np.exp(rng.uniform(np.log(float(info.smallest_subnormal)), np.log(float(info.max)), 5_000)),
                      float(info.max))
    near = [rng.uniform(lo, hi, 1_500) for lo, hi in [(0, 3), (0.9, 1.1), (1.9, 2.1), (1.4, 1.5), (3, 30)]]
    x = np.concatenate([wide] + near).astype(dtype)
    err = ulp_error(kernel(name, dtype)(x), gamma_oracle(name, x, dtype))
    worst = int(np.argmax(err))
    assert err[worst] <= GAMMA_BOUNDS[name][dtype is F64], (name, x[worst], err[worst])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(GAMMA_BOUNDS))
def test_gamma_family_below_zero(name, dtype):
    """The reflection: an error absolute to the reflection's terms (log pi/sin, pi cot, pi^2/sin^2), away from
    the poles."""
    rng = np.random.default_rng(1)
    x = (rng.integers(-10, 0, 5_000) + rng.uniform(0.01, 0.99, 5_000)).astype(dtype)
    want = gamma_oracle(name, x)
    scale = np.maximum(1.0, np.abs(want) if name != "lgamma" else np.abs(np.log(np.pi / np.abs(np.sin(np.pi * x)))))
    tolerance = 1e-13 if dtype is F64 else 1e-5
    assert np.max(np.abs(kernel(name, dtype)(x) - want) / scale) <= tolerance


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(GAMMA_BOUNDS))
def test_gamma_family_special_values(name, dtype):
    """The interpreter's values (C99's lgamma, SciPy's psi and psi'): poles, +-0, +-inf, nan, bit for bit."""
    x = np.array([0.0, -0.0, 1.0, 2.0, -1.0, -2.0, -7.0, INF, -INF, NAN, 1e-30, 1e30], dtype)
    with np.errstate(all="ignore"):
        (want,) = eval_rules[name]([x], {}, None)
        want = np.asarray(want).astype(dtype)
    got = kernel(name, dtype)(x)
    special = ~np.isfinite(want) | (want == 0) | ~np.isfinite(x)
    np.testing.assert_array_equal(got[special], want[special])
    np.testing.assert_allclose(got, want, rtol=1e-14 if dtype is F64 else 1e-6)   # the interpreter's accuracy


def test_log2_log10_exp2_exact_at_powers():
    """log2(8) is 3 and exp2(n) is 2^n exactly, as NumPy gives; log10 of the float powers of ten too."""
    for dtype in (F32, F64):
        n = np.arange(-149 if dtype is F32 else -1074, 128 if dtype is F32 else 1024).astype(dtype)
        np.testing.assert_array_equal(kernel("exp2", dtype)(n), np.exp2(n.astype(F64)).astype(dtype))
        np.testing.assert_array_equal(kernel("log2", dtype)(np.exp2(n.astype(F64)).astype(dtype)), n)
        tens = np.arange(0, 11 if dtype is F32 else 23).astype(dtype)
        np.testing.assert_array_equal(kernel("log10", dtype)((10.0 ** tens).astype(dtype)), tens)


F64_ONLY = ["log2", "log10", "exp2", "cbrt", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "atan2",
            "hypot", "lgamma", "digamma", "trigamma"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", F64_ONLY)
def test_f64_only_functions_vectorize(name, dtype):
    """f32 runs their f64 algorithm: a vector loop of doubles either way, with no calls left."""
    k = kernel(name, dtype)
    assert re.search(r"^\s*call", k.asm, re.MULTILINE) is None
    assert "<4 x double>" in k.llvm_ir or "<8 x double>" in k.llvm_ir


def test_exp_f32_loop_is_vectorized_and_inlined():
    k = kernel("exp", F32)
    assert "zmm" in k.asm or "ymm" in k.asm
    assert re.search(r"^\s*call", k.asm, re.MULTILINE) is None
    assert "<16 x float>" in k.llvm_ir or "<8 x float>" in k.llvm_ir


def scalar_function(ty):
    """A module with one function `ty f(ty)`, and a builder in its body."""
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ty, [ty]), "f")
    return module, fn, ir.IRBuilder(fn.append_basic_block())


def test_function_is_defined_once_per_module():
    module, fn, b = scalar_function(ir.FloatType())
    y = vecmath.call(b, "exp", [vecmath.call(b, "exp", fn.args)])
    b.ret(y)
    defined = [g for g in module.functions if g.name.startswith("adc.vm.") and not g.is_declaration]
    assert [g.name for g in defined] == ["adc.vm.exp.f32"]
    assert defined[0].linkage == "internal" and "alwaysinline" in defined[0].attributes
    assert "readnone" in defined[0].attributes


def test_trig_functions_read_one_constant_table_and_their_fast_variants_none():
    module, fn, b = scalar_function(ir.DoubleType())
    b.ret(vecmath.call(b, "cos", [vecmath.call(b, "sin", [vecmath.call_fast(b, "sin", fn.args)[0]])]))
    for name in ("adc.vm.sin.f64", "adc.vm.cos.f64"):
        attributes = module.get_global(name).attributes
        assert "readonly" in attributes and "readnone" not in attributes, name
    assert "readnone" in module.get_global("adc.vm.sin.fast.f64").attributes
    tables = [g for g in module.global_values if isinstance(g, ir.GlobalVariable)]
    assert [t.name for t in tables] == ["adc.vm.two_over_pi.f64"] and tables[0].global_constant


def test_call_rejects_unknown_names_and_types():
    _, fn, b = scalar_function(ir.IntType(32))
    with pytest.raises(ValueError, match="no function 'gamma'"):
        vecmath.call(b, "gamma", fn.args)
    with pytest.raises(TypeError, match="f32 or f64"):
        vecmath.call(b, "exp", fn.args)


def test_every_function_has_a_reference():
    assert vecmath.FUNCTIONS == set(BOUNDS) | set(BINARY_BOUNDS) | set(GAMMA_BOUNDS) | {"pow", "logaddexp"}
