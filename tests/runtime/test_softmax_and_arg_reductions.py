"""logsumexp, softmax, log_softmax, argmax, argmin, one_hot, any, all and count_nonzero, compiled,
against SciPy and NumPy in f32 and f64: axes (negative ones, None, keepdims), zero sizes, nan and
±inf, inputs of ±1e4 where a naive formula overflows; and the gradient of logsumexp at such inputs.
"""
import numpy as np
import pytest
import scipy.special as sp

import adc



def _shift(x, axis, finite):
    """SciPy's shift by the max (0 where infinite when `finite`), defined on empty inputs too."""
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    return np.where(np.isfinite(m), m, 0) if finite else m


def logsumexp(x, axis=None, keepdims=False):
    m = _shift(x, axis, finite=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def softmax(x, axis):
    e = np.exp(x - _shift(x, axis, finite=False))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis):
    shifted = x - _shift(x, axis, finite=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


SOFTMAX_CASES = [
    # name, result type, adc expression, reference (SciPy's formulas, which raise on some empty inputs)
    ("lse_rows", "T[M]", "logsumexp(x, axis=1)", lambda x: logsumexp(x, axis=1)),
    ("lse_cols_neg", "T[N]", "logsumexp(x, axis=-2)", lambda x: logsumexp(x, axis=0)),
    ("lse_all", "T", "logsumexp(x)", logsumexp),
    ("lse_keep", "T[M, 1]", "logsumexp(x, axis=-1, keepdims=True)", lambda x: logsumexp(x, axis=-1, keepdims=True)),
    ("lse_none_keep", "T[1, 1]", "logsumexp(x, axis=None, keepdims=True)", lambda x: logsumexp(x, keepdims=True)),
    ("softmax", "T[M, N]", "softmax(x)", lambda x: softmax(x, axis=-1)),
    ("softmax_cols", "T[M, N]", "softmax(x, axis=0)", lambda x: softmax(x, axis=0)),
    ("log_softmax", "T[M, N]", "log_softmax(x)", lambda x: log_softmax(x, axis=-1)),
    ("log_softmax_cols", "T[M, N]", "log_softmax(x, axis=-2)", lambda x: log_softmax(x, axis=0)),
]
SCIPY = {"logsumexp": (logsumexp, sp.logsumexp), "softmax": (softmax, sp.softmax),
         "log_softmax": (log_softmax, sp.log_softmax)}
ARG_CASES = [
    ("argmax_rows", "i64[M]", "argmax(x, axis=1)", lambda x: np.argmax(x, axis=1)),
    ("argmin_cols", "i64[N]", "argmin(x, axis=-2)", lambda x: np.argmin(x, axis=0)),
    ("argmax_flat", "i64", "argmax(x)", np.argmax),
    ("argmin_keep", "i64[M, 1]", "argmin(x, axis=1, keepdims=True)", lambda x: np.argmin(x, axis=1, keepdims=True)),
    ("argmax_flat_keep", "i64[1, 1]", "argmax(x, keepdims=True)", lambda x: np.argmax(x, keepdims=True)),
    ("any_rows", "bool[M]", "any(x, axis=1)", lambda x: np.any(x, axis=1)),
    ("all_cols", "bool[N]", "all(x, axis=0)", lambda x: np.all(x, axis=0)),
    ("any_all", "bool", "any(x)", np.any),
    ("all_keep", "bool[M, 1]", "all(x, axis=-1, keepdims=True)", lambda x: np.all(x, axis=-1, keepdims=True)),
    ("count_rows", "i64[M]", "count_nonzero(x, axis=1)", lambda x: np.count_nonzero(x, axis=1)),
    ("count_all", "i64", "count_nonzero(x)", lambda x: np.int64(np.count_nonzero(x))),
    ("count_keep", "i64[1, N]", "count_nonzero(x, axis=0, keepdims=True)",
     lambda x: np.count_nonzero(x, axis=0, keepdims=True)),
]
CASES = SOFTMAX_CASES + ARG_CASES


def _source(dtype: str) -> str:
    return "\n".join(f"def case_{name}(x: {dtype}[M, N]) -> {result.replace('T[', f'{dtype}[').replace('T', dtype)}:\n"
                     f"    return {expr}\n" for name, result, expr, _ in CASES)


@pytest.fixture(scope="module", params=["f32", "f64"])
def compiled(request):
    return np.dtype({"f32": np.float32, "f64": np.float64}[request.param]), adc.compile(_source(request.param))


def _inputs(dtype, rng):
    """Normal values, ±1e4 (exp overflows without the shift), rows and columns holding nan, ±inf,
    only -inf, repeated maxima and zeros; zero-size shapes."""
    wide = rng.standard_normal((4, 5)) * 1e4
    special = rng.standard_normal((5, 6)).round()
    special[0, 2] = special[0, 4] = np.nan
    special[1] = -np.inf
    special[2, 3] = np.inf
    special[3, 1] = -np.inf
    special[4] = 0.0
    return [x.astype(dtype) for x in (rng.standard_normal((3, 7)), wide, special, np.zeros((0, 3)),
                                      np.zeros((2, 0)), np.zeros((0, 0)))]


def _defined(name: str, x) -> bool:
    """NumPy raises for an argmax or argmin over nothing (adc's result is pinned apart)."""
    reduced = {"rows": 1, "cols": 0, "keep": 1}.get(name.rsplit("_", 1)[-1], None)
    empty = x.size == 0 if reduced is None or "flat" in name else x.shape[reduced] == 0
    return not (name.startswith("arg") and empty)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_match_scipy_and_numpy(compiled, case):
    dtype, module = compiled
    name, _, _, reference = case
    kernel = getattr(module, f"case_{name}")
    for x in _inputs(dtype, np.random.default_rng(len(name))):
        if not _defined(name, x):
            continue
        with np.errstate(all="ignore"):
            want = np.asarray(reference(x))
        got = kernel(x).numpy()
        assert got.shape == want.shape and got.dtype == (want.dtype if want.dtype.kind != "f" else dtype), name
        if want.dtype.kind == "f":
            tol = 2e-6 if dtype == np.float32 else 1e-13
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.max(1 + np.abs(np.nan_to_num(want)), initial=1),
                                       err_msg=f"{name} of {x}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{name} of {x}")


@pytest.mark.parametrize("name", sorted(SCIPY))
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_references_are_scipy_where_scipy_is_defined(name, axis):
    reference, scipy_function = SCIPY[name]
    for x in _inputs(np.float64, np.random.default_rng(axis + 7)):
        with np.errstate(all="ignore"):
            if x.size:
                np.testing.assert_allclose(reference(x, axis=axis), scipy_function(x, axis=axis), rtol=1e-14)


def test_arg_reductions_of_an_empty_axis_give_zero():
    """NumPy raises, a kernel cannot: a reduced axis of size 0 at run time gives index 0."""
    module = adc.compile("def rows(x: f64[M, N]) -> i64[M]:\n    return argmax(x, axis=1)\n"
                         "def flat(x: f32[M, N]) -> i64:\n    return argmin(x)\n")
    np.testing.assert_array_equal(module.rows(np.zeros((3, 0))).numpy(), np.zeros(3, np.int64))
    assert module.flat(np.zeros((0, 4), np.float32)).numpy() == 0


def test_arg_reductions_of_integers_and_bools_take_the_first_extremum():
    module = adc.compile("def imax(x: i32[M, N]) -> i64[M]:\n    return argmax(x, axis=1)\n"
                         "def imin(x: i64[M, N]) -> i64[N]:\n    return argmin(x, axis=0)\n"
                         "def bmax(x: f64[M, N]) -> i64[M]:\n    return argmax(x > 0.0, axis=1)\n")
    x = np.random.default_rng(3).integers(-2, 3, (6, 9))
    x[0] = np.iinfo(np.int32).min           # every element the identity of max: the first index
    np.testing.assert_array_equal(module.imax(x.astype(np.int32)).numpy(), np.argmax(x.astype(np.int32), axis=1))
    x[1] = np.iinfo(np.int64).max
    np.testing.assert_array_equal(module.imin(x).numpy(), np.argmin(x, axis=0))
    f = np.random.default_rng(4).standard_normal((5, 7))
    f[2] = -1.0
    np.testing.assert_array_equal(module.bmax(f).numpy(), np.argmax(f > 0, axis=1))


def test_one_hot_as_tensorflow():
    """An index outside [0, depth), negative ones too, gives a row of zeros; depth may be a symbol."""
    module = adc.compile("def hot(i: i64[M, N]) -> f32[M, N, 4]:\n    return one_hot(i, 4)\n"
                         "def hot64(i: i32[N], v: f64[K]) -> f64[N, K]:\n    return one_hot(i, K, dtype=f64) * v\n"
                         "def mask(i: i32[N]) -> bool[N, 3]:\n    return one_hot(i, 3, dtype=bool)\n")
    i = np.array([[0, 3, 4], [-1, 2, 1]])
    want = (i[..., None] == np.arange(4)).astype(np.float32)
    got = module.hot(i).numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    v = np.arange(1.0, 6.0)
    np.testing.assert_array_equal(module.hot64(np.array([4, 0, 5, -3], np.int32), v).numpy(),
                                  np.array([[0, 0, 0, 0, 5], [1, 0, 0, 0, 0], [0] * 5, [0] * 5], float))
    np.testing.assert_array_equal(module.mask(np.array([2, 7], np.int32)).numpy(), [[False, False, True], [False] * 3])


def test_truth_of_integers_bools_and_nan_as_numpy():
    module = adc.compile("def a(x: i32[N]) -> (bool, bool, i64):\n    return any(x), all(x), count_nonzero(x)\n"
                         "def b(x: f32[N]) -> (bool, bool, i64):\n    c = x > 0.0\n"
                         "    return any(c), all(c), count_nonzero(c)\n"
                         "def n(x: f64[N]) -> (bool, bool, i64):\n    return any(x), all(x), count_nonzero(x)\n")
    for x in ([0, 0], [0, -3], [1, 2], []):
        x = np.array(x, np.int32)
        assert [r.numpy() for r in module.a(x)] == [np.any(x), np.all(x), np.count_nonzero(x)]
        f = x.astype(np.float32)
        assert [r.numpy() for r in module.b(f)] == [np.any(f > 0), np.all(f > 0), np.count_nonzero(f > 0)]
    x = np.array([np.nan, 0.0, -0.0, np.inf])
    assert [r.numpy() for r in module.n(x)] == [True, False, 2]
    assert [r.numpy() for r in module.n(x[:1])] == [True, True, 1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradient_of_logsumexp_is_softmax_at_large_inputs(dtype):
    """The shift by the max is under stop_gradient: the gradient is exactly softmax, finite at ±1e4."""
    name = "f32" if dtype == np.float32 else "f64"
    module = adc.compile(f"def total(x: {name}[M, N]) -> {name}:\n    return sum(logsumexp(x, axis=1))\n")
    x = (np.random.default_rng(5).standard_normal((4, 6)) * 1e4).astype(dtype)
    x[1, 2] = x[1, 4] = x[1].max() + 50          # a tied maximum shares nothing: each gets its softmax
    got = adc.grad(module.total)(x).numpy()
    want = sp.softmax(x.astype(np.float64), axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-14, atol=1e-7)
    np.testing.assert_array_equal(got[1, [2, 4]], [0.5, 0.5])
