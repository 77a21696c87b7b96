"""A kernel call's Python-side work (Kernel.run_bound) has two routes: adc/runtime/native_call.c,
built by setup.py where there is a C compiler, and `Kernel._run_in_python` where it is not. Both
must give the same results: each test here runs on both. Oracles: NumPy, closed forms."""
import numpy as np
import pytest

import adc
from adc.abi import STATUS_SHAPES
from adc.runtime import buffers, kernel
from adc.runtime.kernel import Kernel
from tests.support.indexed_when_run import INDEXED_WHEN_RUN

SOURCE = """\
def shapes(x: f32[N, M]) -> (f32[M, N], f32[N], f32):
    return transpose(x), sum(x, axis=1), sum(x)

def scaled(x: f32[N]) -> f32[N]:
    return x * 2.0
"""

MANY = 70     # params: more argument slots than the C route keeps on its stack
WIDE = "def wide({}) -> f64:\n    return {}\n".format(
    ", ".join(f"a{i}: f64" for i in range(MANY)), " + ".join(f"a{i}" for i in range(MANY)))


@pytest.fixture(params=["call", "c", "python"])
def route(request, monkeypatch):
    """The whole call in C (native_call.call), or the Python side's checks with run_bound in C or
    through ctypes."""
    if request.param != "call":
        monkeypatch.setattr(Kernel, "call_in_c", False)
    if request.param == "python":
        monkeypatch.setattr(Kernel, "run_bound", Kernel._run_in_python)
    return request.param


@pytest.fixture(scope="module")
def m():
    return adc.compile(SOURCE, "native_call.adc")


def test_the_c_route_is_built():
    """setup.py builds it wherever a C compiler is, as on every machine that runs these tests;
    a silent build failure would leave every call on the slower Python route."""
    assert kernel.native_call is not None
    assert Kernel.run_bound is Kernel._run_native


def test_results_of_dynamic_and_static_shapes(m, route):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    transposed, rows, total = m.shapes(x)
    np.testing.assert_array_equal(transposed.numpy(), x.T)
    np.testing.assert_array_equal(rows.numpy(), x.sum(axis=1))
    assert total.numpy().shape == () and float(total) == 66.0
    for result in (transposed, rows, total):
        assert not result.numpy().flags.writeable      # a Tensor never changes


def test_empty_arguments_and_results(m, route):
    transposed, rows, total = m.shapes(np.zeros((0, 5), np.float32))
    assert transposed.shape == (5, 0) and rows.shape == (0,) and float(total) == 0.0
    assert m.scaled(transposed.numpy()[0]).shape == (0,)     # an empty result read back as an argument


def test_a_large_result_is_a_pooled_block(m, route):
    n = buffers.MIN_BYTES // 4 + 1
    x = np.ones(n, np.float32)
    y = m.scaled(x)
    np.testing.assert_array_equal(y.numpy()[[0, -1]], [2.0, 2.0])
    assert y.numpy().base is not None and y.numpy().base.dtype == np.uint8     # buffers.empty's view


def test_more_arguments_than_the_stack_holds(route):
    wide = adc.compile(WIDE, "wide.adc").wide
    assert float(wide(*map(float, range(MANY)))) == MANY * (MANY - 1) / 2


def test_a_failing_status_is_the_error_it_names(route):
    m = adc.compile(INDEXED_WHEN_RUN, "indexed.adc")
    with pytest.raises(ValueError, match=r"branch: .* needs M-1 >= 0, but M = 0"):
        m.branch(np.zeros(0), -1.0)
    assert float(m.branch(np.zeros(0), 2.0)) == 2.0      # the branch that indexes did not run


def test_a_tape_gradient_through_both_halves_of_a_split_vjp(route):
    x, y = adc.Variable(2.0), adc.Variable(3.0)
    with adc.GradientTape() as tape:
        z = x * x + y * y
    assert [float(g) for g in tape.gradient(z, [x, y])] == [4.0, 6.0]


SIZED = """\
def pair(a: f64[N, 3], b: f64[N], s: f64) -> (f64[3, N], f64[N], f64[2]):
    return transpose(a), b * s, stack([s, s + 1.0])
"""


@pytest.fixture
def c_calls(monkeypatch):
    """What native_call.call returned for each call it was given."""
    returned, call = [], kernel.native_call.call
    monkeypatch.setattr(kernel.native_call, "call", lambda plan, args: returned.append(call(plan, args)) or returned[-1])
    return returned


def test_a_call_of_plain_arrays_runs_whole_in_c(c_calls):
    pair = adc.compile(SIZED, "sized.adc").pair
    a, b = np.arange(12.0).reshape(4, 3), np.linspace(0, 1, 4)
    first = pair(a, b, np.array(2.0))           # planned at the first call, and run in C
    variable = adc.Variable(b)
    calls = [(a, b, np.array(2.0)), (adc.Tensor(a), adc.Tensor(b), adc.Tensor(2.0)),
             (a[:0], b[:0], np.array(-1.0)), (a, variable, adc.Variable(np.array(3.0)))]
    for args in calls:
        t, scaled, pair_of = pair(*args)
        a_, b_, s_ = (np.asarray(x.numpy() if isinstance(x, adc.Variable) else x) for x in args)
        np.testing.assert_array_equal(t.numpy(), a_.T)
        np.testing.assert_array_equal(scaled.numpy(), b_ * s_)
        assert pair_of.numpy().tolist() == [float(s_), float(s_) + 1.0] and not t.numpy().flags.writeable
    variable.assign(-b)      # a Variable is read at each call: its value now
    np.testing.assert_array_equal(pair(a, variable, np.array(2.0))[1].numpy(), -b * 2.0)
    assert [type(r) for r in c_calls] == [tuple] * (len(calls) + 2)
    np.testing.assert_array_equal(first[1].numpy(), b * 2.0)


def test_calls_the_c_route_declines_take_the_checked_route(c_calls):
    """Arguments it would have to convert (lists, strides, Python floats, a Variable of another
    dtype), sizes that disagree: None, nothing run, and the Python side converts or raises the error
    naming the parameter."""
    pair = adc.compile(SIZED, "sized.adc").pair
    a, b = np.arange(12.0).reshape(4, 3), np.linspace(0, 1, 4)
    pair(a, b, np.array(2.0))
    converted = [(a.tolist(), b, np.array(2.0)), (np.asfortranarray(a), b, np.array(2.0)),
                 (a, np.linspace(0, 1, 8)[::2], np.array(2.0)), (a, b, 2.0)]
    for args in converted:
        np.testing.assert_array_equal(pair(*args)[1].numpy(), np.asarray(args[1]) * 2.0)
    with pytest.raises(TypeError, match="parameter 'b' expects dtype f64"):
        pair(a, adc.Variable(b.astype(np.float32)), np.array(2.0))
    with pytest.raises(ValueError, match="parameter 'b'.* N"):
        pair(a, adc.Variable(np.ones(5)), np.array(2.0))
    with pytest.raises(ValueError, match="parameter 'b'.* N"):
        pair(a, np.ones(5), np.array(2.0))
    with pytest.raises(ValueError, match="parameter 'a'"):
        pair(np.ones((4, 2)), b, np.array(2.0))
    with pytest.raises(TypeError, match="parameter 'b' expects dtype f64"):
        pair(a, b.astype(np.float32), np.array(2.0))
    with pytest.raises(ValueError, match="parameter 'a' expects rank 2"):
        pair(a.ravel(), b, np.array(2.0))
    assert type(c_calls[0]) is tuple and c_calls[1:] == [None] * (len(converted) + 6)


def test_a_failing_status_from_the_c_route_is_the_error_it_names(c_calls):
    m = adc.compile(INDEXED_WHEN_RUN, "indexed.adc")
    assert float(m.branch(np.zeros(0), 2.0)) == 2.0
    for x in (np.zeros(0), np.zeros(0), adc.Variable(np.zeros(0))):
        with pytest.raises(ValueError, match=r"branch: .* needs M-1 >= 0, but M = 0"):
            m.branch(x, np.array(-1.0))
    assert c_calls[-3:] == [STATUS_SHAPES] * 3


def test_kernels_the_c_route_cannot_plan_keep_the_python_side():
    """Index params (their values checked first), constraints and dims given by expressions."""
    m = adc.compile("def pick(x: f64[N], i: i64[K]) -> f64[K]:\n    return x[i]\n"
                    "def grow(x: f64[N]) -> f64[N + 1]:\n    return concat([x, stack([f64(1.0)])])\n", "unplanned.adc")
    x = np.arange(4.0)
    for _ in range(2):
        np.testing.assert_array_equal(m.pick(x, np.array([3, 0])).numpy(), [3.0, 0.0])
        np.testing.assert_array_equal(m.grow(x).numpy(), [0.0, 1.0, 2.0, 3.0, 1.0])
        with pytest.raises(IndexError, match="index 4 is out of bounds"):
            m.pick(x, np.array([4]))
    assert m.pick._call_plan is False and m.grow._call_plan is False


def test_malformed_plans_and_calls_raise():
    plan = kernel.native_call.plan
    dtype = np.dtype(np.float64)
    with pytest.raises(ValueError, match="address of 0"):
        plan(0, (dtype,), (1,), (), 0, ())
    with pytest.raises(TypeError, match="plan"):
        plan(1, (dtype,), (1, 2), (), 0, ())
    with pytest.raises(TypeError, match="numpy.dtype"):
        plan(1, (np.float64,), (1,), (), 0, ())
    with pytest.raises(ValueError, match="rule"):
        plan(1, (dtype,), (1,), ((0, 1, -1, False, 3),), 0, ())     # axis 1 of a rank-1 param
    with pytest.raises(ValueError, match="rule"):
        plan(1, (dtype,), (1,), ((0, 0, 2, False, 0),), 1, ())      # slot 2 of 1 dim
    with pytest.raises(ValueError, match="result"):
        plan(1, (dtype,), (1,), (), 1, ((dtype, (-2,)),))           # the slot of a dim not there
    with pytest.raises(TypeError, match="call"):
        kernel.native_call.call(plan(1, (), (), (), 0, ()), [])
    with pytest.raises(ValueError):
        kernel.native_call.call(object(), ())


@pytest.fixture(params=["c", "ctypes"])
def run_at_route(request, monkeypatch):
    """Kernel.run_at's two routes: native_call.run_at, and ctypes where the extension is not built."""
    if request.param == "ctypes":
        monkeypatch.setattr(kernel, "native_call", None)
    return request.param


def test_run_at_writes_the_results_into_memory_the_caller_owns(m, run_at_route):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    results = [np.full(shape, -1.0, dtype) for dtype, shape in m.shapes.result_shapes(m.shapes.dims_of([x.shape]))]
    m.shapes.run_at(m.shapes.dims_of([x.shape]), [x.ctypes.data] + [r.ctypes.data for r in results])
    np.testing.assert_array_equal(results[0], x.T)
    np.testing.assert_array_equal(results[1], x.sum(axis=1))
    assert float(results[2]) == 66.0
    wide = adc.compile(WIDE, "wide.adc").wide
    args, total = [np.array(float(k)) for k in range(MANY)], np.zeros(())     # more slots than the C stack's
    wide.run_at([], [a.ctypes.data for a in args] + [total.ctypes.data])
    assert float(total) == MANY * (MANY - 1) / 2


def test_run_at_raises_the_error_a_failing_status_names(run_at_route):
    branch = adc.compile(INDEXED_WHEN_RUN, "indexed.adc").branch
    x, k, out = np.zeros(0), np.float64(-1.0), np.zeros(())
    with pytest.raises(ValueError, match=r"branch: .* needs M-1 >= 0, but M = 0"):
        branch.run_at(branch.dims_of([x.shape, ()]), [x.ctypes.data, np.asarray(k).ctypes.data, out.ctypes.data])


def test_run_into_writes_the_results_into_arrays_the_caller_owns(m, run_at_route):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    sizes = m.shapes.dims_of([x.shape])
    results = [np.full(shape, -1.0, dtype) for dtype, shape in m.shapes.result_shapes(sizes)]
    m.shapes.run_into(sizes, [*m.shapes.arrays_of((x,)), *results])
    np.testing.assert_array_equal(results[0], x.T)
    np.testing.assert_array_equal(results[1], x.sum(axis=1))
    assert float(results[2]) == 66.0
    wide = adc.compile(WIDE, "wide.adc").wide
    args, total = [np.array(float(k)) for k in range(MANY)], np.zeros(())     # more slots than the C stack's
    wide.run_into([], [*args, total])
    assert float(total) == MANY * (MANY - 1) / 2
    out = np.zeros(3, np.float32)
    for result, why in ((np.zeros(6, np.float32)[::2], "C-contiguous"), (out.view(), "writeable")):
        if why == "writeable":
            result.setflags(write=False)
        with pytest.raises(ValueError, match="C-contiguous"):
            m.scaled.run_into([3], [np.ones(3, np.float32), result])
    assert (out == 0).all()


def test_arrays_of_keeps_the_callers_arrays_and_checks_the_rest(m):
    x = np.ones(4, np.float32)
    (same,) = m.scaled.arrays_of((x,))
    assert same is x
    strided = np.arange(8, dtype=np.float32)[::2]
    (copied,) = m.scaled.arrays_of((strided,))
    assert copied.flags.c_contiguous and (copied == strided).all()
    (converted,) = m.scaled.arrays_of(([1.0, 2.0],))
    assert converted.dtype == np.float32 and converted.tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match=r"scaled: parameter 'x' expects dtype f32 \(float32\), got float64"):
        m.scaled.arrays_of((np.ones(4),))
    with pytest.raises(ValueError, match="parameter 'x' expects rank 1"):
        m.scaled.arrays_of((np.ones((2, 2), np.float32),))
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        m.scaled.arrays_of(())


def test_the_c_route_refuses_malformed_calls():
    with pytest.raises(ValueError, match="address of 0"):
        kernel.native_call.run(0, [], [], ())
    with pytest.raises(TypeError, match="run"):
        kernel.native_call.run(1, (), [], ())
    with pytest.raises(TypeError, match="dtype, shape"):
        kernel.native_call.run(1, [], [], ((np.float32, (2,)),))
    with pytest.raises(TypeError, match=r"dict\._array is not a __slots__ member"):
        kernel.native_call.setup(dict, adc.Variable, buffers.empty, buffers.MIN_BYTES)   # nothing set
    with pytest.raises(TypeError, match=r"Tensor\._value is not a __slots__ member"):
        kernel.native_call.setup(adc.Tensor, adc.Tensor, buffers.empty, buffers.MIN_BYTES)
    for not_a_tensor in (np.zeros(2), adc.Variable(np.zeros(2))):     # run takes Tensors only
        with pytest.raises(TypeError, match="expected an adc Tensor"):
            kernel.native_call.run(1, [], [not_a_tensor], ())
    with pytest.raises(ValueError, match="address of 0"):
        kernel.native_call.run_at(0, 0, [], [])
    with pytest.raises(TypeError, match="run_at"):
        kernel.native_call.run_at(1, 0, (), [])
    with pytest.raises(ValueError, match="more inputs than addresses"):
        kernel.native_call.run_at(1, 3, [], [0, 0])
    with pytest.raises(TypeError, match="run_arrays"):
        kernel.native_call.run_arrays(1, 0, [], ())
    with pytest.raises(ValueError, match="more inputs than arrays"):
        kernel.native_call.run_arrays(1, 3, [], [np.zeros(1)])
    with pytest.raises(TypeError, match="expected a NumPy array, got int"):
        kernel.native_call.run_arrays(1, 1, [], [0])


def blend(x, y, w):
    """The Python function of the signature of BLEND: its TypeErrors are the oracle."""


BLEND = "def blend(x: f64[N], y: f64[N], w: f64) -> f64[N]:\n    return x * w + y\n"
BAD_CALLS = [((), {"x": 1.0, "y": 1.0, "bogus": 2.0}), ((), {"x": 1.0, "bogus": 2.0}), ((1.0,), {"z": 0.0}),
             ((1.0, 1.0, 1.0), {"w": 1.0, "bogus": 1.0}), ((1.0, 1.0, 1.0, 1.0), {}), ((1.0, 1.0), {"x": 1.0}),
             ((), {}), ((1.0,), {}), ((1.0,), {"w": 1.0})]


@pytest.mark.parametrize("args, kwargs", BAD_CALLS)
def test_a_call_that_does_not_fit_the_parameters_is_pythons_type_error(route, monkeypatch, args, kwargs):
    """Named as Python names it (an unknown keyword was reported as the parameter it left missing),
    before any native code runs."""
    kernel = adc.compile(BLEND, "blend.adc").blend
    with pytest.raises(TypeError) as expected:
        blend(*args, **kwargs)
    ran = []
    monkeypatch.setattr(Kernel, "run_bound", lambda *a: ran.append(a))
    with pytest.raises(TypeError) as got:
        kernel(*[np.ones(3)] * len(args), **{k: np.ones(3) for k in kwargs})
    assert str(got.value) == str(expected.value) and ran == []


def test_keywords_bind_in_any_order(route):
    kernel = adc.compile(BLEND, "blend.adc").blend
    x, y = np.arange(3.0), np.array([1.0, -2.0, 0.5])
    for call in (lambda: kernel(y=y, w=2.0, x=x), lambda: kernel(x, w=2.0, y=y), lambda: kernel(x, y, w=2.0)):
        assert np.array_equal(np.asarray(call()), x * 2.0 + y)
