"""take / x[idx] (the `gather` op) and scatter_add, compiled, against NumPy (np.take, x[idx],
np.add.at) and the interpreter; the index rule at its edges (negative, huge, empty); gradients
against finite differences to second order; batching against a loop of single calls; an
embedding trained by SGD against a NumPy twin; and the located errors of misuse.
"""
import itertools

import numpy as np
import pytest

import adc
from adc.codegen.lowering.fusion import plan
from adc.driver import write_shared_object
from adc.frontend import compile_source
from adc.ir.interp import run
from adc.passes.adjoint import vjp
from adc.passes.batch import batch
from tests.support.gradcheck import check_jvp, check_vjp
from tests.support.native import jit_module
from tests.support.twin import clamped, scattered

SOURCE = """\
def rows(x: T[V, D], idx: I[B, S]) -> T[B, S, D]:
    return x[idx]

def columns(x: T[V, D], idx: I[K]) -> T[V, K]:
    return x[:, idx]

def last_axis(x: T[V, D], idx: I[K]) -> T[V, K]:
    return take(x, idx, axis=-1)

def add_rows(base: T[V, D], idx: I[K], updates: T[K, D]) -> T[V, D]:
    return scatter_add(base, idx, updates)

def add_columns(base: T[V, D], idx: I[K], updates: T[V, K]) -> T[V, D]:
    return scatter_add(base, idx, updates, axis=1)

def shifted_rows(x: T[V, D], idx: I[B, S], k: I[1]) -> T[B, S, D]:
    return x[idx + k]

def add_shifted_rows(base: T[V, D], idx: I[K], updates: T[K, D], k: I[1]) -> T[V, D]:
    return scatter_add(base, idx + k, updates)
"""


def compiled(dtype, index_dtype):
    return adc.compile(SOURCE.replace("T[", f"{dtype}[").replace("I[", f"{index_dtype}["), "gather.adc")


NUMPY = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}


def random(rng, shape, dtype):
    if dtype == "i32":
        return rng.integers(-50, 50, shape).astype(np.int32)
    return rng.standard_normal(shape).astype(NUMPY[dtype])


@pytest.mark.parametrize("dtype, index_dtype", itertools.product(["f32", "f64", "i32"], ["i32", "i64"]))
def test_in_range_indices_match_numpy(dtype, index_dtype):
    m, rng = compiled(dtype, index_dtype), np.random.default_rng(0)
    x = random(rng, (5, 4), dtype)
    for idx in ([[0, 4, 4], [-1, -5, 2]], [[3]], np.zeros((0, 2)), np.zeros((2, 0))):
        idx = np.asarray(idx, NUMPY[index_dtype])
        np.testing.assert_array_equal(m.rows(x, idx), x[idx])
    idx = np.asarray([3, -4, 3, 0, -1], NUMPY[index_dtype])          # duplicates and negatives
    np.testing.assert_array_equal(m.columns(x, idx), x[:, idx])
    np.testing.assert_array_equal(m.last_axis(x, idx), np.take(x, idx, axis=-1))
    rows, columns = idx % 5, idx
    for kernel, axis, updates, at in ((m.add_rows, 0, random(rng, (5, 4), dtype), rows),
                                      (m.add_columns, 1, random(rng, (5, 5), dtype), columns)):
        expected = x.copy()
        np.add.at(expected, (slice(None),) * axis + (at,), updates)
        np.testing.assert_allclose(kernel(x, at.astype(NUMPY[index_dtype]), updates), expected, rtol=1e-6)


def test_computed_indices_out_of_range_clamp_in_native_code_and_the_interpreter():
    m = compiled("f64", "i64")
    module = compile_source(SOURCE.replace("T[", "f64[").replace("I[", "i64["), "gather.adc")
    x = np.arange(20.0).reshape(5, 4)
    big = np.iinfo(np.int64)
    idx = np.array([[5, 6, -6, -7], [big.max, big.min, 2 ** 40, -(2 ** 40)]])
    want = x[clamped(idx, 5)]
    np.testing.assert_array_equal(want[:, :2], x[[[4, 4], [4, 0]]])
    np.testing.assert_array_equal(m.shifted_rows(x, idx, [0]), want)
    np.testing.assert_array_equal(run(module, "shifted_rows", x, idx, np.zeros(1, np.int64))[0], want)
    updates = np.ones((8, 4))
    expected = np.zeros((5, 4))
    np.add.at(expected, clamped(idx.ravel(), 5), updates)
    np.testing.assert_array_equal(m.add_shifted_rows(np.zeros((5, 4)), idx.ravel(), updates, [0]), expected)
    np.testing.assert_array_equal(run(module, "add_shifted_rows", np.zeros((5, 4)), idx.ravel(), updates,
                                      np.zeros(1, np.int64))[0], expected)


@pytest.fixture(scope="module")
def gather_so(tmp_path_factory):
    path = tmp_path_factory.mktemp("so") / "gather.so"
    write_shared_object(compile_source(SOURCE.replace("T[", "f64[").replace("I[", "i64["), "gather.adc"), path)
    return path


@pytest.mark.parametrize("kernel, args", [
    ("rows", lambda x, i: (x, i.reshape(2, 2))), ("columns", lambda x, i: (x.T, i)),
    ("last_axis", lambda x, i: (x.T, i)), ("add_rows", lambda x, i: (x, i, np.ones((4, 4)))),
    ("add_columns", lambda x, i: (x.T, i, np.ones((4, 4))))])
def test_an_index_parameter_out_of_range_raises_numpys_index_error_before_running(kernel, args, gather_so):
    m = compiled("f64", "i64")
    x = np.arange(20.0).reshape(5, 4)
    getattr(m, kernel)(*args(x, np.array([0, 4, -5, -1])))          # [-5, 5): in range, as NumPy
    for bad in (5, -6, np.iinfo(np.int64).max):
        with pytest.raises(IndexError, match=rf"{kernel}: parameter 'idx': index {bad} is out of bounds "
                                             rf"for an axis of size 5 \([VD]\)"):
            getattr(m, kernel)(*args(x, np.array([0, bad, 1, 2])))
    with pytest.raises(IndexError, match="index 5 is out of bounds"):     # the bounds travel in the .so
        getattr(adc.load(gather_so), kernel)(*args(x, np.array([0, 5, 1, 2])))


def test_an_empty_axis_is_never_read():
    # gathering from an empty axis gives zeros; scatter_add has nowhere to add
    # (computed indices: as parameters, any index into an empty axis is an IndexError, as in NumPy)
    m = compiled("f32", "i32")
    empty = np.zeros((0, 3), np.float32)
    idx = np.array([[0, -1], [7, 2]], np.int32)
    np.testing.assert_array_equal(m.shifted_rows(empty, idx, [0]), np.zeros((2, 2, 3), np.float32))
    assert m.add_shifted_rows(empty, idx.ravel(), np.ones((4, 3), np.float32), [0]).shape == (0, 3)
    with pytest.raises(IndexError, match="index 0 is out of bounds for an axis of size 0"):
        m.rows(empty, idx)
    assert m.rows(empty, np.zeros((2, 0), np.int32)).shape == (2, 0, 3)     # no index: nothing to check


def test_an_embedding_lookup_fuses_into_its_consumer():
    # the gather is a load through an index map: x[idx] * 2 + 1 is one loop nest, no temporary
    module = compile_source("def f(w: f32[V, D], idx: i64[B]) -> f32[B, D]:\n    return w[idx] * 2.0 + 1.0\n", "e.adc")
    func = module["f"]
    (gathered,) = [op.result for op in func.ops if op.name == "gather"]
    assert plan(func).is_fused(gathered)


GRADIENTS = """\
def loss(w: f64[V, D], idx: i64[B, S], u: f64[K, D], at: i32[K]) -> f64:
    e = w[idx]
    s = scatter_add(w * w, at, sin(u))
    r = scatter(exp(w), at, u * u)
    return sum(e * e * e) + sum(s * w * 0.5) + sum(take(w, at) * u) + sum(r * sin(w))
"""


def test_gradients_match_finite_differences_to_second_order():
    module = compile_source(GRADIENTS, "grad.adc")
    rng = np.random.default_rng(1)
    w, u = rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    idx = np.array([[0, 3, 3], [-1, 2, 0]])                 # repeated and negative indices
    at = np.array([1, 1, -4, 2, 9], np.int32)               # 9 clamps to the last row
    check_vjp(module, "loss", [w, idx, u, at], order=2)


SCATTERED = "def f(w: f64[V, D], idx: i64[B], v: f64[B, D]) -> f64:\n    return sum(exp(w)) + sum(w[idx] * v)\n"


def test_a_gathers_cotangent_is_scattered_into_the_others_buffer():
    """d/dw of sum(exp(w)) + sum(w[idx] * v): the gather's cotangent is not a scatter into zeros added
    to exp(w) ct, but a scatter of its updates into the buffer the loop of exp(w) ct fills."""
    module = compile_source(SCATTERED, "s.adc")
    _, gradient = vjp(module, "f", [0])
    func = gradient.func
    assert [op.name for op in func.ops].count("scatter_add") == 1 and "add" not in {op.name for op in func.ops}
    (scatter,) = [op for op in func.ops if op.name == "scatter_add"]
    assert plan(func).scattered_into == {scatter.operands[0]: scatter.result}
    w, v, idx = np.arange(12.0).reshape(4, 3), np.ones((5, 3)), np.array([1, 1, 3, -1, 0])
    m = adc.compile(SCATTERED, "s.adc")
    expected = np.exp(w)
    np.add.at(expected, idx, v)
    np.testing.assert_allclose(adc.grad(m.f, wrt="w")(w, idx, v), expected, rtol=1e-14)


SELF_UPDATES = """\
def rows_added(y: f64[4, 5], i: i64[4]) -> f64[4, 5]:
    e = y + 1.0
    return scatter_add(e, i, e, axis=0)

def columns_added(x: f64[2]) -> f64[1, 5, 5]:
    return scatter_add(broadcast_to(sum(x), [1, 5, 5]), full([5], 3, dtype=i64), broadcast_to(sum(x), [1, 5, 5]),
                       axis=-1)

def columns_written(y: f64[3, 4], i: i64[4]) -> f64[3, 4]:
    e = y * 2.0
    return scatter(e, i, e + 1.0, axis=1)
"""


@pytest.mark.parametrize("check_bounds", [False, True])
def test_a_scatter_whose_updates_read_its_base_reads_the_base_before_any_update(check_bounds):
    """scatter_add(e, i, e): the base is not computed into the scatter's buffer, where the updates
    would read the columns earlier updates changed (rows_added gave 12 for 10, in both builds)."""
    m = adc.compile(SELF_UPDATES, "s.adc", check_bounds=check_bounds)
    rng = np.random.default_rng(5)
    y, i = rng.standard_normal((4, 5)), np.array([1, 1, 3, 1])
    e = y + 1.0
    want = e.copy()
    np.add.at(want, i, e)
    np.testing.assert_allclose(m.rows_added(y, i), want, rtol=1e-15)
    x = np.array([1.0, 10.0])
    want = np.full((1, 5, 5), 11.0)
    want[..., 3] += 5 * 11.0
    np.testing.assert_array_equal(m.columns_added(x), want)
    y, i = rng.standard_normal((3, 4)), np.array([2, 0, 2, 1])
    np.testing.assert_array_equal(m.columns_written(y, i), scattered(2.0 * y, i, 2.0 * y + 1.0, 1))


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64", "bool"])
def test_scatter_keeps_the_last_duplicate_in_native_code_and_the_interpreter(dtype):
    source = (f"def f(b: {dtype}[N, M], i: i64[J, K], u: {dtype}[N, J, K], k: i64[1]) -> {dtype}[N, M]:\n"
              f"    return scatter(b, i + k, u, axis=1)\n")     # computed indices: not checked, clamped
    rng = np.random.default_rng(4)
    numpy_dtype = np.dtype({"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "bool": "bool"}[dtype])
    b, u = (rng.integers(-9, 9, shape).astype(numpy_dtype) for shape in ((3, 5), (3, 2, 4)))
    i = np.array([[4, 0, 4, -1], [9, -7, 1, 0]])            # duplicates, negatives, out of range both ways
    want = scattered(b, i, u, 1)
    (interpreted,) = run(compile_source(source, "s.adc"), "f", b, i, u, np.zeros(1, np.int64))
    np.testing.assert_array_equal(interpreted, want)
    np.testing.assert_array_equal(adc.compile(source).f(b, i, u, [0]).numpy(), want)
    empty = adc.compile(source).f(np.zeros((3, 0), numpy_dtype), i, u, [0])   # nothing lands on an empty axis
    assert empty.shape == (3, 0)


SPLIT = """\
def added_rows(b: f32[N, M], i: i64[K], u: f32[K, M]) -> f32[N, M]:
    return scatter_add(b, i, u)

def added_columns(b: f32[N, M], i: i64[K], u: f32[N, K]) -> f32[N, M]:
    return scatter_add(b * 2.0, i, u, axis=1)

def written_columns(b: f32[N, M], i: i64[K], u: f32[N, K]) -> f32[N, M]:
    return scatter(b, i, u, axis=1)
"""


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_a_scatter_split_between_threads_gives_the_serial_bits(threads):
    """Large enough to be split (a base of >= 131072 elements, 2048 updates or more): each thread
    copies and updates only its positions along the axis, scanning every index, so duplicates on
    either side of a split (the indices crowd around 1024, the middle of 2048) still accumulate in
    the updates' order, as np.add.at's float32 sums do, and the last of them stays."""
    rng = np.random.default_rng(11)
    m = adc.compile(SPLIT, "split.adc")
    b = rng.standard_normal((2048, 96)).astype(np.float32)
    rows, u_rows = rng.integers(1000, 1050, 2400), rng.standard_normal((2400, 96)).astype(np.float32)
    columns = np.concatenate([rng.integers(40, 56, 2100), [-1, 0, 95, -96]])
    u_columns = rng.standard_normal((2048, columns.size)).astype(np.float32)
    wanted = {"added_rows": b.copy(), "added_columns": b * np.float32(2.0),
              "written_columns": scattered(b, columns, u_columns, 1)}
    np.add.at(wanted["added_rows"], rows, u_rows)
    np.add.at(wanted["added_columns"], (slice(None), clamped(columns, 96)), u_columns)
    args = {"added_rows": (b, rows, u_rows), "added_columns": (b, columns, u_columns),
            "written_columns": (b, columns, u_columns)}
    try:
        adc.set_num_threads(threads)
        for name, want in wanted.items():
            np.testing.assert_array_equal(getattr(m, name)(*args[name]).numpy(), want, err_msg=name)
    finally:
        adc.set_num_threads(0)


def test_scatter_gradients_in_both_modes_give_the_last_duplicate_its_cotangent():
    module = compile_source("def f(b: f64[N], i: i64[K], u: f64[K]) -> f64[N]:\n    return scatter(b, i, u) ** 2\n",
                            "s.adc")
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(4), np.array([2, 0, 2, -4]), rng.standard_normal(4)]
    check_vjp(module, "f", args, order=2)
    check_jvp(module, "f", args)
    m = adc.compile("def f(b: f64[N], i: i64[K], u: f64[K]) -> f64:\n    return sum(scatter(b, i, u) * 1.5)\n")
    db, du = adc.grad(m.f, wrt=("b", "u"))(*args)
    np.testing.assert_array_equal(db.numpy(), [0.0, 1.5, 0.0, 1.5])           # rows 0 and 2 written
    np.testing.assert_array_equal(du.numpy(), [0.0, 0.0, 1.5, 1.5])           # 2 written again; -4 is row 0 again


@pytest.mark.parametrize("t", [1, 0, -1, -3])
def test_writing_one_slice_has_the_gradients_of_finite_differences(t):
    """`y[t] = u` with one index: its one slice always stays (no duplicates to rank), counted from
    the start or the end; first and second order, and forward mode."""
    module = compile_source("def f(b: f64[N, 2], t: i64, u: f64[2]) -> f64[N, 2]:\n"
                            "    y = b\n    y[t] = u * u\n    return y * b\n", "s.adc")
    rng = np.random.default_rng(6)
    args = [rng.standard_normal((3, 2)), np.int64(t), rng.standard_normal(2)]
    check_vjp(module, "f", args, order=2)
    check_jvp(module, "f", args)
    m = adc.compile("def f(b: f64[N, 2], t: i64, u: f64[2]) -> f64:\n    y = b\n    y[t] = u\n"
                    "    return sum(y * 1.5)\n")
    db, du = adc.grad(m.f, wrt=("b", "u"))(*args)
    written = t % 3
    want = np.full((3, 2), 1.5)
    want[written] = 0.0
    np.testing.assert_array_equal(db.numpy(), want)
    np.testing.assert_array_equal(du.numpy(), [1.5, 1.5])


def test_compiled_gradient_accumulates_repeated_indices():
    m = adc.compile("def f(w: f64[V, D], idx: i64[B]) -> f64:\n    return sum(w[idx] * w[idx])\n", "g.adc")
    w, idx = np.random.default_rng(2).standard_normal((4, 3)), np.array([1, 1, 3, -1, 0])
    expected = np.zeros_like(w)
    np.add.at(expected, idx, 2 * w[idx])
    np.testing.assert_allclose(adc.grad(m.f, wrt="w")(w, idx), expected, rtol=1e-12)


BATCHED = """\
def f(x: f64[M, N], idx: i64[K], u: f64[M, K]) -> (f64[M, K], f64[M, N], f64[M, N]):
    return take(x, idx, axis=1) * 2.0, scatter_add(x, idx, u, axis=1), scatter(x, idx, u, axis=1)
"""


@pytest.mark.parametrize("flags", [f for f in itertools.product([False, True], repeat=3) if any(f)],
                         ids=lambda f: "".join("b" if x else "-" for x in f))
def test_batching_equals_a_loop_of_single_calls(flags):
    module = compile_source(BATCHED, "b.adc")
    out, func = batch(module, "f", flags)
    rng, examples = np.random.default_rng(3), 3
    single = [rng.standard_normal((2, 4)), rng.integers(-4, 4, (5,)), rng.standard_normal((2, 5))]
    args = [np.stack([rng.permutation(a.ravel()).reshape(a.shape) for _ in range(examples)]) if flag else a
            for a, flag in zip(single, flags)]
    loop = [run(module, "f", *[a[s] if flag else a for a, flag in zip(args, flags)]) for s in range(examples)]
    native = jit_module(out)
    for got in (run(out, func.name, *args), getattr(native, func.name)(*args)):
        for g, want in zip(got, zip(*loop), strict=True):
            np.testing.assert_allclose(np.asarray(g), np.stack(want), rtol=1e-12)


def test_embedding_trained_by_sgd_matches_numpy():
    # loss = sum(w[idx]²); its gradient adds 2 w[i] once per occurrence of i (np.add.at)
    m = adc.compile("def loss(w: f64[V, D], idx: i64[B, S]) -> f64:\n    e = w[idx]\n    return sum(e * e)\n",
                    "sgd.adc")
    grad = adc.grad(m.loss, wrt="w")
    rng = np.random.default_rng(4)
    w = rng.standard_normal((6, 3))
    idx = np.array([[0, 2, 2], [5, 0, 2]])
    twin = w.copy()
    for _ in range(5):
        w = w - 0.1 * np.asarray(grad(w, idx))
        g = np.zeros_like(twin)
        np.add.at(g, idx, 2 * twin[idx])
        twin = twin - 0.1 * g
        np.testing.assert_allclose(w, twin, rtol=1e-12)
        np.testing.assert_allclose(m.loss(w, idx), np.sum(twin[idx] ** 2), rtol=1e-12)
    assert not np.allclose(w[[0, 2, 5]], rng.standard_normal((3, 3)))


HEAD = "def f(x: f32[N, D], i: i64[K], j: i32[K], y: f32[K], m: bool[K], u: f32[K, D]) -> f32[K, D]:\n"


@pytest.mark.parametrize("line, where, message", [
    ("    return x[y]\n", (2, 14), "indices must be an i32 or i64 tensor, got f32[K]"),
    ("    return x[m]\n", (2, 14), "indices must be an i32 or i64 tensor, got bool[K]"),
    ("    return take(x, 1.5)\n", (2, 20), "indices must be an i32 or i64 tensor, got number 1.5"),
    ("    return take(x, i, axis=2)\n", (2, 28), "axis 2 is out of range for rank 2"),
    ("    return x[i, 0]\n", (2, 17), "an integer tensor index can only be combined with ':' and '...'"),
    ("    return x[None, i]\n", (2, 14), "an integer tensor index can only be combined with ':' and '...'"),
    ("    return scatter_add(x, i, y)\n", (2, 30), "updates must be f32[K,D]"),
    ("    return scatter_add(x, j, f64(u))\n", (2, 30), "updates must be f32 like base"),
    ("    return scatter_add(m, i, m)\n", (2, 24), "cannot add into bool[K]"),
])
def test_misuse_is_a_located_compile_error(line, where, message):
    with pytest.raises(adc.CompileError) as info:
        adc.compile(HEAD + line, "bad.adc")
    err = info.value
    assert message in str(err)
    assert (err.loc.line, err.loc.col) == where, str(err)
    assert "^" in str(err)


ALONG = """\
def along_rows(x: f64[B, N], idx: i64[B, K]) -> f64[B, K]:
    return take_along_axis(x, idx, axis=1)

def along_broadcast(x: f64[B, N, C], idx: i32[1, K, C]) -> f64[B, K, C]:
    return take_along_axis(x, idx, 1)

def along_first(x: f64[B, N], idx: i64[K, N]) -> f64[K, N]:
    return take_along_axis(x * x, idx, axis=0)
"""


def test_take_along_axis_matches_numpy_and_the_index_rule():
    m = adc.compile(ALONG, "along.adc")
    rng = np.random.default_rng(5)
    x, idx = rng.standard_normal((3, 5)), rng.integers(-5, 5, (3, 4))
    np.testing.assert_array_equal(m.along_rows(x, idx).numpy(), np.take_along_axis(x, idx, 1))
    x3, idx3 = rng.standard_normal((2, 5, 3)), rng.integers(0, 5, (1, 4, 3)).astype(np.int32)
    np.testing.assert_array_equal(m.along_broadcast(x3, idx3).numpy(),
                                  np.take_along_axis(x3, np.broadcast_to(idx3, (2, 4, 3)), 1))
    idx0 = rng.integers(-3, 3, (2, 5))
    np.testing.assert_array_equal(m.along_first(x, idx0).numpy(), np.take_along_axis(x * x, idx0, 0))
    wild = np.array([[7, -9, 4, 0], [-1, 5, -6, 2], [100, -100, 3, 3]])
    np.testing.assert_array_equal(m.along_rows(x, wild).numpy(), np.take_along_axis(x, clamped(wild, 5), 1))
    np.testing.assert_array_equal(m.along_rows(np.zeros((3, 0)), wild).numpy(), np.zeros((3, 4)))


def test_take_along_axis_gradients_both_modes():
    module = compile_source(ALONG, "along.adc")
    rng = np.random.default_rng(6)
    args = [rng.standard_normal((3, 5)), np.array([[1, 1, 4], [0, 2, 2], [3, 4, -1]])]
    check_vjp(module, "along_rows", args, order=2, rtol=1e-6, atol=1e-9)
    check_jvp(module, "along_rows", args, rtol=1e-6, atol=1e-9)
    check_vjp(module, "along_first", [rng.standard_normal((3, 5)), rng.integers(0, 3, (2, 5))], order=2,
              rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("call, message", [
    ("take_along_axis(x, u, axis=1)", "take_along_axis needs indices of x's rank 2, got i64[K]"),
    ("take_along_axis(x, f64(reshape(u, [1, K])), axis=1)", "indices must be an i32 or i64 tensor"),
    ("take_along_axis(x, reshape(u, [K, 1]), axis=1)", "do not broadcast against x f64[B,N] outside axis 1"),
])
def test_take_along_axis_misuse_is_a_located_error(call, message):
    source = f"def f(x: f64[B, N], u: i64[K]) -> f64[B, K]:\n    return {call}\n"
    with pytest.raises(adc.CompileError, match=message.replace("[", r"\[").replace("]", r"\]")) as info:
        compile_source(source, "bad.adc")
    assert info.value.loc.line == 2
