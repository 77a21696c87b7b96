"""cumsum and cumprod, compiled, against NumPy in f32, f64, i32 and i64: every axis of a 3-d
tensor (negative ones, None), exclusive and reverse scans, zero sizes known at compile time and
at run time, nan and ±inf, shapes large enough for the parallel loops; the eager ops and
np.cumsum/np.cumprod on Tensors; misuse as located errors.
"""
import numpy as np
import pytest

import adc

DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}


def reference(op, x, axis, exclusive=False, reverse=False):
    """np.cumsum / np.cumprod in x's dtype; reverse flips the axis, exclusive shifts in the identity."""
    x = np.flip(x, axis) if reverse else x
    out = getattr(np, op)(x, axis=axis, dtype=x.dtype)
    if exclusive:
        first = np.full(x.shape[:axis] + (1,) + x.shape[axis + 1:], 1 if op == "cumprod" else 0, x.dtype)
        out = np.concatenate([first, out], axis)[(slice(None),) * axis + (slice(0, x.shape[axis]),)]
    return np.flip(out, axis) if reverse else out


def scan_module(dtype: str) -> adc.Module:
    kernels = [f"def {op}_{a}_{e}_{r}(x: {dtype}[A, B, C]) -> {dtype}[A, B, C]:\n"
               f"    return {op}(x, axis={a - 3 if a else 0}, exclusive={e}, reverse={r})\n"
               for op in ("cumsum", "cumprod") for a in range(3) for e in (False, True) for r in (False, True)]
    flat = f"def flat(x: {dtype}[A, B, C]) -> {dtype}[A*B*C]:\n    return cumsum(x)\n"
    return adc.compile("".join(kernels) + flat)


def draw(rng, dtype, shape):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-3, 4, shape).astype(dtype)
    return (rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_values_match_numpy(dtype):
    m, rng = scan_module(dtype), np.random.default_rng(0)
    for shape in [(2, 3, 4), (0, 3, 2), (3, 0, 2), (2, 3, 0), (1, 1, 1), (40, 70, 33)]:
        x = draw(rng, DTYPES[dtype], shape)
        for op in ("cumsum", "cumprod"):
            for a in range(3):
                for e in (False, True):
                    for r in (False, True):
                        got = getattr(m, f"{op}_{a}_{e}_{r}")(x).numpy()
                        want = reference(op, x, a, e, r)
                        assert got.dtype == want.dtype and got.shape == want.shape
                        # each step in NumPy's order, so they agree bit for bit
                        np.testing.assert_array_equal(got, want, err_msg=f"{op} {a} {e} {r} {shape}")
        np.testing.assert_array_equal(m.flat(x).numpy(), np.cumsum(x, dtype=x.dtype))


def test_nan_and_inf_propagate_as_numpy():
    x = np.array([[1.0, np.nan, 2.0, 3.0], [np.inf, 1.0, -np.inf, 2.0], [0.0, np.inf, 2.0, 0.0]])
    m = scan_module("f64")
    with np.errstate(invalid="ignore"):
        for op in ("cumsum", "cumprod"):
            for a in range(2):
                for r in (False, True):
                    np.testing.assert_array_equal(getattr(m, f"{op}_{a + 1}_False_{r}")(x[None]).numpy()[0],
                                                  reference(op, x, a, reverse=r))


def test_bool_scans_count_as_i64_and_static_empty_axes():
    m = adc.compile("def count(x: bool[N]) -> i64[N]:\n    return cumsum(x)\n"
                    "def empty(x: f32[3, 0]) -> f32[3, 0]:\n    return cumprod(x, axis=1, exclusive=True)\n")
    x = np.array([True, False, True, True])
    np.testing.assert_array_equal(m.count(x).numpy(), np.cumsum(x))
    assert m.empty(np.zeros((3, 0), np.float32)).numpy().shape == (3, 0)


def test_eager_ops_and_numpy_functions():
    x = np.arange(1.0, 7.0).reshape(2, 3)
    t = adc.constant(x)
    np.testing.assert_array_equal(adc.math.cumsum(t).numpy(), np.cumsum(x, axis=0))      # tf's axis=0
    np.testing.assert_array_equal(adc.math.cumprod(t, axis=-1, exclusive=True, reverse=True).numpy(),
                                  reference("cumprod", x, 1, True, True))
    np.testing.assert_array_equal(np.cumsum(t).numpy(), np.cumsum(x))                     # NumPy's: flattened
    np.testing.assert_array_equal(np.cumprod(t, axis=1).numpy(), np.cumprod(x, axis=1))
    np.testing.assert_array_equal(adc.math.cumsum(adc.constant(np.arange(5, dtype=np.int32))).numpy(),
                                  np.cumsum(np.arange(5, dtype=np.int32), dtype=np.int32))
    with pytest.raises(ValueError, match="out of range"):
        adc.math.cumsum(t, axis=2)
    with pytest.raises(ValueError, match="rank >= 1"):
        adc.math.cumprod(adc.constant(2.0))


def test_gradient_at_zeros_through_the_tape():
    # d/dx sum(cumprod(x)) at x = [1, 0, 2, 3]: 1 (only y0 lacks x1), 1 + 2 + 6, then 0 and 0
    v = adc.Variable(np.array([1.0, 0.0, 2.0, 3.0]))
    with adc.GradientTape() as tape:
        y = adc.reduce_sum(adc.math.cumprod(v))
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), [1.0, 9.0, 0.0, 0.0])


@pytest.mark.parametrize("source, message", [
    ("def f(x: f32[N]) -> f32[N]:\n    return cumsum(x, axis=1)\n", "axis 1"),
    ("def f(x: f32) -> f32:\n    return cumprod(x, axis=0)\n", "axis 0"),
])
def test_misuse_is_a_located_error(source, message):
    with pytest.raises(adc.CompileError, match=message) as info:
        adc.compile(source, "scan.adc")
    assert "scan.adc:2:" in str(info.value)
