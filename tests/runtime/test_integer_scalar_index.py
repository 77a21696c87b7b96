"""Integer scalars (an i64 or i32 parameter, a loop counter, an argmax) index like integers in
NumPy's basic indexing: mixed with integers, slices, None and `...`, in reads and in writes.
Each expression or statement is also run by NumPy, the oracle; compiled code and the reference
interpreter must agree with it. Gradients against central differences (reverse to second order,
forward, compiled Jacobians), in a loop over its counter; batching with the index batched or
shared, and batch Jacobians; out-of-range indices under the index rule of docs/language.md; and
the located errors of a bool, a float or a computed slice bound.
"""
import itertools

import numpy as np
import pytest

import adc
from adc.frontend import compile_source
from adc.ir.interp import run
from adc.passes.batch import batch
from tests.support.gradcheck import STEP, check_jvp, check_vjp
from tests.support.native import jit_module
from tests.support.twin import clamped

SHAPE = (4, 5, 3)
# a: i64 indexes axes 0 and 1 (values in [-4, 4)); c: i32 any axis (values in [-3, 3))
READS = ["x[a, 0]", "x[0, a]", "x[a, c]", "x[a, c, 1]", "x[-1, a, c]", "x[a, 1:4]", "x[1:, a]",
         "x[::2, a, c]", "x[a, ..., c]", "x[..., c]", "x[None, a, :, c]", "x[a, None, c]", "x[c, a][1:]",
         "x[a, -2:, c]", "x[2, a, ::2]", "x[argmax(x[:, 0, 0]), a, c]", "x[1:3, argmax(x[0, :, 1]), c]"]
WRITES = ["z[a, 0] = v[0]", "z[a, 1:4] = v[1:4]", "z[1:, a, c] = v[0:3, 0]", "z[a, :, c] = v[:, 1]",
          "z[None, a, c] = v[0:1]", "z[a, ::2, c] = 7.0", "z[..., c] = v[0:4, 0:1]", "z[a, c] = v[c]",
          "z[a, a] = v[a] * 2.0", "z[-1, a, 1:] = v[a, 1:]", "z[1, a] = v[a]", "z[a, 1:4] += v[1:4]",
          "z[None, a, c] *= v[0:1]", "z[a, :, c] -= v[:, c]"]
VALUES = [(0, 0), (3, -1), (-4, 2), (-1, -3), (2, 1)]


def adc_type(shape) -> str:
    return f"f64[{', '.join(map(str, shape))}]" if shape else "f64"


def read_source() -> str:
    x = np.zeros(SHAPE)
    return "".join(f"def r{k}(x: f64[4, 5, 3], a: i64, c: i32) -> "
                   f"{adc_type(np.shape(eval(e, {'x': x, 'a': 1, 'c': 1, 'argmax': np.argmax})))}:\n"
                   f"    return {e}\n\n" for k, e in enumerate(READS))


def write_source() -> str:
    return "".join(f"def w{k}(x: f64[4, 5, 3], v: f64[5, 3], a: i64, c: i32) -> f64[4, 5, 3]:\n"
                   f"    z = x * 1.0\n    {s}\n    return z\n\n" for k, s in enumerate(WRITES))


def numpy_write(statement: str, x, v, a, c):
    z = x.copy()
    exec(statement, {"z": z, "v": v, "a": a, "c": c})
    return z


@pytest.fixture(scope="module")
def reads():
    source = read_source()
    return adc.compile(source, "reads.adc"), compile_source(source, "reads.adc")


@pytest.fixture(scope="module")
def writes():
    source = write_source()
    return adc.compile(source, "writes.adc"), compile_source(source, "writes.adc")


@pytest.mark.parametrize("k", range(len(READS)), ids=READS)
def test_reads_match_numpy(reads, k):
    m, module = reads
    x = np.random.default_rng(k).standard_normal(SHAPE)
    for a, c in VALUES:
        want = eval(READS[k], {"x": x, "a": a, "c": c, "argmax": np.argmax})
        got = getattr(m, f"r{k}")(x, np.int64(a), np.int32(c))
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"a={a}, c={c}")
        np.testing.assert_array_equal(run(module, f"r{k}", x, np.int64(a), np.int32(c))[0], want)


@pytest.mark.parametrize("k", range(len(WRITES)), ids=WRITES)
def test_writes_match_numpy(writes, k):
    m, module = writes
    rng = np.random.default_rng(k)
    x, v = rng.standard_normal(SHAPE), rng.standard_normal((5, 3))
    for a, c in VALUES:
        want = numpy_write(WRITES[k], x, v, a, c)
        got = getattr(m, f"w{k}")(x, v, np.int64(a), np.int32(c))
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"a={a}, c={c}")
        np.testing.assert_array_equal(run(module, f"w{k}", x, v, np.int64(a), np.int32(c))[0], want)


MIXED = """\
def f(x: f64[4, 5, 3], v: f64[5, 3], a: i64, c: i32) -> f64[4, 5, 3]:
    z = x * x
    z[a, 1:4] = tanh(v[1:4]) * x[a, 0, c]
    z[None, -1, c] = sin(v[c, 0:3]) * z[a, c]
    z[a, :, c] = z[a, :, c] * x[c, a, 1:2]
    z[a, 1:, c] += z[a, :4, c] * v[c, 1]
    return z * x[1:2, a]
"""

LOOP = """\
def f(x: f64[N, 3], w: f64[3]) -> f64[N, 3]:
    out = zeros([N, 3], dtype=f64)
    s = w
    for i in range(N):
        s = tanh(s * x[i, 0] + x[i - 1, :])
        out[i, 1:] = s[1:] * x[N - 1 - i, 2]
        out[i, 0] = s[0] * s[i % 3] + x[i, i % 3]
    return out
"""


def numpy_loop(x, w):
    out, s = np.zeros_like(x), w
    for i in range(len(x)):
        s = np.tanh(s * x[i, 0] + x[i - 1, :])
        out[i, 1:] = s[1:] * x[len(x) - 1 - i, 2]
        out[i, 0] = s[0] * s[i % 3] + x[i, i % 3]
    return out


@pytest.mark.parametrize("a, c", VALUES)
def test_gradients_through_reads_and_writes_match_finite_differences(a, c):
    module = compile_source(MIXED, "mixed.adc")
    rng = np.random.default_rng([a + 4, c + 3])
    args = [rng.standard_normal(SHAPE), rng.standard_normal((5, 3)), np.int64(a), np.int32(c)]
    check_vjp(module, "f", args, order=2)
    check_jvp(module, "f", args)


def test_gradients_in_a_loop_indexed_by_its_counter_match_finite_differences():
    module = compile_source(LOOP, "loop.adc")
    rng = np.random.default_rng(7)
    args = [rng.standard_normal((5, 3)), rng.standard_normal(3)]
    np.testing.assert_allclose(run(module, "f", *args)[0], numpy_loop(*args), rtol=1e-12)
    check_vjp(module, "f", args, order=2)
    check_jvp(module, "f", args)


@pytest.mark.parametrize("source, args", [
    (MIXED, lambda rng: [rng.standard_normal(SHAPE), rng.standard_normal((5, 3)), np.int64(-2), np.int32(1)]),
    (LOOP, lambda rng: [rng.standard_normal((5, 3)), rng.standard_normal(3)])], ids=["mixed", "loop"])
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_compiled_jacobians_match_finite_differences(source, args, mode):
    m = adc.compile(source, "jac.adc")
    args = args(np.random.default_rng(8))
    x = args[0]
    jac = np.asarray(adc.jacobian(m.f, wrt=0, mode=mode)(*args))
    assert jac.shape == x.shape + x.shape
    for j in np.ndindex(x.shape):
        moved = [x.copy(), x.copy()]
        moved[0][j] += STEP
        moved[1][j] -= STEP
        column = (np.asarray(m.f(moved[0], *args[1:])) - np.asarray(m.f(moved[1], *args[1:]))) / (2 * STEP)
        np.testing.assert_allclose(jac[(...,) + j], column, rtol=1e-6, atol=1e-8, err_msg=f"d f / d x{list(j)}")


def test_the_loop_matches_numpy_in_native_code():
    m = adc.compile(LOOP, "loop.adc")
    for n in (0, 1, 2, 7):
        x, w = np.random.default_rng(n).standard_normal((n, 3)), np.linspace(-1.0, 1.0, 3)
        np.testing.assert_allclose(np.asarray(m.f(x, w)), numpy_loop(x, w), rtol=1e-12)


BATCHED = """\
def f(x: f64[4, 5], v: f64[5], a: i64, c: i32) -> (f64[3], f64[4, 5]):
    z = x * 1.0
    z[a, 1:] = tanh(v[1:]) * x[c, a]
    return x[a, 1:4] * v[c], z
"""


@pytest.mark.parametrize("flags", [f for f in itertools.product([False, True], repeat=4) if any(f)],
                         ids=lambda f: "".join("b" if x else "-" for x in f))
def test_batching_with_the_index_batched_or_shared_equals_a_loop_of_single_calls(flags):
    module = compile_source(BATCHED, "b.adc")
    out, func = batch(module, "f", flags)
    rng, examples = np.random.default_rng(3), 3
    single = [rng.standard_normal((4, 5)), rng.standard_normal(5), np.int64(-3), np.int32(2)]
    draws = [lambda: rng.standard_normal((4, 5)), lambda: rng.standard_normal(5),
             lambda: rng.integers(-4, 4), lambda: rng.integers(-4, 4)]
    args = [np.stack([np.asarray(draw(), a.dtype) for _ in range(examples)]) if flag else a
            for a, draw, flag in zip(single, draws, flags)]
    loop = [run(module, "f", *[a[s] if flag else a for a, flag in zip(args, flags)]) for s in range(examples)]
    native = jit_module(out)
    for got in (run(out, func.name, *args), getattr(native, func.name)(*args)):
        for g, want in zip(got, zip(*loop), strict=True):
            np.testing.assert_allclose(np.asarray(g), np.stack(want), rtol=1e-12)     # tanh: an ulp apart


PER_EXAMPLE = """\
def f(x: f64[B, N, 3], a: i64) -> f64[B, N, 2]:
    z = tanh(x[:, :, 1:])
    z[:, a, 1] = x[:, -1, 2] ** 2 * x[:, a, 0]
    return z
"""

# a fused nest of pads, a concat and a gather by a scalar index, once miscompiled on AVX-512
# (tests/codegen/test_scalar_operands.py)
PADDED_GATHER = """\
def f(x: f64[B, N, 3], a: i64) -> f64[B, N, 2]:
    z = tanh(x[:, :, 1:]) * x[:, None, a, 0:1]
    z[:, a, 1] = x[:, -1, 2] ** 2
    return z
"""


def batch_jacobian_by_differences(kernel, x, *rest):
    """J[e] = d kernel(x)[e] / d x[e], example by example, element by element, by central differences."""
    examples, one = x.shape[0], x.shape[1:]
    want = None
    for e in range(examples):
        for j in np.ndindex(one):
            moved = [x.copy(), x.copy()]
            moved[0][(e,) + j] += STEP
            moved[1][(e,) + j] -= STEP
            column = (np.asarray(kernel(moved[0], *rest)) - np.asarray(kernel(moved[1], *rest)))[e] / (2 * STEP)
            want = np.zeros((examples,) + column.shape + one) if want is None else want
            want[(e, ...) + j] = column
    return want


def test_batch_jacobians_through_scalar_indices_match_finite_differences():
    m = adc.compile(PER_EXAMPLE, "per.adc")
    x, a = np.random.default_rng(9).standard_normal((3, 4, 3)), np.int64(-3)
    want = batch_jacobian_by_differences(m.f, x, a)
    for mode in ("reverse", "forward"):
        np.testing.assert_allclose(np.asarray(adc.batch_jacobian(m.f, mode=mode)(x, a)), want, rtol=1e-6, atol=1e-8)
    with adc.GradientTape() as tape:
        xv = adc.Variable(x)
        y = m.f(xv, a)
    np.testing.assert_allclose(np.asarray(tape.batch_jacobian(y, xv)), want, rtol=1e-6, atol=1e-8)


def test_a_scalar_index_along_the_example_axis_mixes_examples():
    # every example reads example a: the batch Jacobian is not the diagonal of the full one
    m = adc.compile("def f(x: f64[B, N], a: i64) -> f64[B, N]:\n    return x * x[a]\n", "mix.adc")
    with pytest.raises(adc.CompileError, match="examples mix"):
        adc.batch_jacobian(m.f)(np.ones((3, 2)), 1)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_batch_jacobian_through_a_new_axis_and_a_write(mode):
    m = adc.compile(PADDED_GATHER, "per.adc")
    x, a = np.random.default_rng(9).standard_normal((3, 4, 3)), np.int64(-3)
    want = batch_jacobian_by_differences(m.f, x, a)
    np.testing.assert_allclose(np.asarray(adc.batch_jacobian(m.f, mode=mode)(x, a)), want, rtol=1e-6, atol=1e-8)


OUT_OF_RANGE = """\
def read(p: f64[N, M], b: i64, k: i64) -> f64[M-1]:
    return p[b + k, 1:]

def write(p: f64[N, M], b: i64, k: i64) -> f64[N, M]:
    z = p * 1.0
    z[b + k, 1:] = -1.0
    return z

def direct(p: f64[N, M], b: i64) -> f64:
    return p[b, 0]
"""


def test_computed_scalar_indices_out_of_range_follow_the_index_rule():
    """p[b + k, 1:] wraps once when negative, then clamps to [0, n-1], in native code and the
    interpreter alike, for reads and writes."""
    m, module = adc.compile(OUT_OF_RANGE, "range.adc"), compile_source(OUT_OF_RANGE, "range.adc")
    p = np.arange(12.0).reshape(3, 4)
    for b in (3, 4, -4, -5, 2 ** 40, -(2 ** 40), np.iinfo(np.int64).max, np.iinfo(np.int64).min, -1, -3):
        row = int(clamped(b, 3))
        assert row == (min(b, 2) if b >= 0 else max(b + 3, 0))          # the rule, spelled out
        written = p.copy()
        written[row, 1:] = -1.0
        args = (p, np.int64(b), np.int64(0))
        np.testing.assert_array_equal(np.asarray(m.read(*args)), p[row, 1:], err_msg=f"b={b}")
        np.testing.assert_array_equal(run(module, "read", *args)[0], p[row, 1:])
        np.testing.assert_array_equal(np.asarray(m.write(*args)), written, err_msg=f"b={b}")
        np.testing.assert_array_equal(run(module, "write", *args)[0], written)


def test_a_scalar_index_parameter_out_of_range_raises_numpys_index_error():
    m = adc.compile(OUT_OF_RANGE, "range.adc")
    p = np.arange(12.0).reshape(3, 4)
    assert m.direct(p, -3) == p[-3, 0]
    for bad in (3, -4):
        with pytest.raises(IndexError, match=f"parameter 'b': index {bad} is out of bounds for an axis of size 3"):
            m.direct(p, bad)


HEAD = "def f(x: f64[N, M], a: i64, t: bool, s: f64) -> f64[M]:\n"


@pytest.mark.parametrize("line, where, message", [
    ("    return x[t]\n", (2, 14), "indices must be an i32 or i64 tensor, got bool; a bool is not an index"),
    ("    return x[t, :]\n", (2, 14), "a bool is not an index (NumPy would read it as a mask"),
    ("    return x[True]\n", (2, 14), "got boolean True; a bool is not an index"),
    ("    return x[s]\n", (2, 14), "indices must be an i32 or i64 tensor, got f64; convert them with i64(...)"),
    ("    return x[1.5, :]\n", (2, 14), "indices must be an i32 or i64 tensor, got number 1.5"),
    ("    return x[0, a:]\n", (2, 17), "a slice bound must be a static integer"),
    ("    return x[0, ::a]\n", (2, 19), "a slice step must be a static integer"),
    ("    z = x * 1.0\n    z[t, 0] = 1.0\n    return z[0]\n", (3, 7), "a bool is not an index"),
    ("    z = x * 1.0\n    z[a, s] = 1.0\n    return z[0]\n", (3, 10), "got f64; convert them with i64(...)"),
    ("    z = x * 1.0\n    z[0, :a] = 1.0\n    return z[0]\n", (3, 11), "a slice bound must be a static integer"),
    ("    z = x * 1.0\n    z[a, 1:] = x[0]\n    return z[0]\n", (3, 5),
     "cannot assign f64[M] to an element of f64[N,M], of shape (M-1,)"),
])
def test_a_bool_a_float_or_a_computed_slice_bound_is_a_located_error(line, where, message):
    with pytest.raises(adc.CompileError) as info:
        compile_source(HEAD + line, "bad.adc")
    err = info.value
    assert message in str(err)
    assert (err.loc.line, err.loc.col) == where, str(err)
    assert "^" in str(err)
