"""for, while and if in the language: each kernel's reference interpretation equals the same code
run by Python on NumPy arrays; misuse is a located CompileError saying what is wrong."""
import numpy as np
import pytest

from adc.errors import CompileError
from adc.frontend import compile_source
from adc.ir.interp import run
from adc.ir.verify import verify

RNG = np.random.default_rng(0)


def interpret(source, name, *args):
    module = compile_source(source, "k.adc")
    verify(module, require_locations=True)
    results = run(module, name, *args)
    return results[0] if len(results) == 1 else results


RANGES = """
def ranges(x: f64[N], a: i64, b: i64) -> f64:
    total = 0.0
    for i in range(b):
        total += x[i]
    for i in range(a, b):
        total = total + 10.0 * x[i]
    for i in range(b, a, -2):
        total = total + 100.0 * x[i]
    for i in range(N - 1, -1, -3):
        total = total + 1000.0 * x[i]
    for i in range(2, N):
        total = total + 10000.0 * x[i]
    return total
"""


def ranges_reference(x, a, b):
    total = 0.0
    for i in range(b):
        total += x[i]
    for i in range(a, b):
        total += 10.0 * x[i]
    for i in range(b, a, -2):
        total += 100.0 * x[i]
    for i in range(len(x) - 1, -1, -3):
        total += 1000.0 * x[i]
    for i in range(2, len(x)):
        total += 10000.0 * x[i]
    return total


@pytest.mark.parametrize("a, b", [(0, 0), (0, 1), (1, 5), (3, 2), (2, 6), (-3, 4)])
def test_range_forms_count_like_python(a, b):
    x = RNG.standard_normal(7)
    got = interpret(RANGES, "ranges", x, np.int64(a), np.int64(b))
    np.testing.assert_allclose(got, ranges_reference(x, a, b), rtol=1e-12)


NESTED = """
def matpow(a: f64[N, N], k: i64) -> f64[N, N]:
    p = zeros([N, N], dtype=f64)
    for i in range(N):
        p[i, i] = 1.0
    for step in range(k):
        q = zeros([N, N], dtype=f64)
        for i in range(N):
            for j in range(N):
                q[i, j] = sum(p[i] * a[:, j])
        p = q
    return p
"""


@pytest.mark.parametrize("k", [0, 1, 3])
def test_nested_loops_and_element_assignment(k):
    a = RNG.standard_normal((4, 4))
    np.testing.assert_allclose(interpret(NESTED, "matpow", a, np.int64(k)), np.linalg.matrix_power(a, k),
                               rtol=1e-12, atol=1e-12)


NEWTON = """
def cube_root(c: f64, tol: f64) -> (f64, i64):
    x = c
    steps = 0
    while abs(x * x * x - c) > tol:
        x = x - (x * x * x - c) / (3.0 * x * x)
        steps += 1
    return x, steps
"""


@pytest.mark.parametrize("c", [1.0, 8.0, 27.0, 1000.0])
def test_while_runs_a_data_dependent_number_of_iterations(c):
    x, steps = interpret(NEWTON, "cube_root", np.float64(c), np.float64(1e-12))
    expected_x, expected_steps = c, 0
    while abs(expected_x ** 3 - c) > 1e-12:
        expected_x -= (expected_x ** 3 - c) / (3 * expected_x ** 2)
        expected_steps += 1
    assert x == expected_x and steps == expected_steps
    np.testing.assert_allclose(x, np.cbrt(c), rtol=1e-12)


BRANCHES = """
def piecewise(x: f32[N], t: f32) -> f32[N]:
    if t > 1.0:
        y = x * t
    elif t > 0.0:
        y = x + t
        z = y
    else:
        y = -x
    if N > 2:
        y = y * 2.0
    return y
"""


@pytest.mark.parametrize("t", [2.0, 0.5, -1.0])
@pytest.mark.parametrize("n", [2, 3])
def test_if_elif_else(t, n):
    x = RNG.standard_normal(n).astype(np.float32)
    y = x * np.float32(t) if t > 1 else x + np.float32(t) if t > 0 else -x
    np.testing.assert_array_equal(interpret(BRANCHES, "piecewise", x, np.float32(t)), y * 2 if n > 2 else y)


def test_a_static_condition_elaborates_only_the_branch_taken():
    source = """
def f(x: f32[N]) -> f32[N]:
    scale = 3
    if scale > 2:
        x = x * 2.0
    else:
        x = undefined_name
    return x
"""
    module = compile_source(source, "k.adc")
    assert [op.name for op in module["f"].ops] == ["constant", "broadcast", "mul"]


TRAJECTORY = """
def euler(x0: f64[S], a: f64[S, S], h: f64, times: f64[T]) -> f64[T, S]:
    traj = zeros([T, S], dtype=f64)
    x = x0
    for t in range(T):
        traj[t] = x
        x = x + h * (a @ x)
    return traj
"""


def test_a_loop_builds_a_trajectory_by_assignment_at_the_counter():
    x0, a = RNG.standard_normal(3), RNG.standard_normal((3, 3))
    expected, x = [], x0
    for _ in range(5):
        expected.append(x)
        x = x + 0.1 * (a @ x)
    np.testing.assert_allclose(interpret(TRAJECTORY, "euler", x0, a, np.float64(0.1), np.zeros(5)),
                               np.array(expected), rtol=1e-12)


def test_assignment_into_a_column_and_by_an_index_tensor():
    source = """
def put(m: f32[R, C], v: f32[R], idx: i64[K], rows: f32[K, C], j: i64) -> f32[R, C]:
    m[:, j] = v
    m[idx] = rows
    m[0, 1] = 7.0
    return m
"""
    m, v = RNG.standard_normal((4, 3)).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    idx, rows = np.array([3, 1]), RNG.standard_normal((2, 3)).astype(np.float32)
    expected = m.copy()
    expected[:, 2] = v
    expected[idx] = rows
    expected[0, 1] = 7.0
    np.testing.assert_array_equal(interpret(source, "put", m, v, idx, rows, np.int64(2)), expected)


def test_a_carried_number_takes_its_type_after_one_iteration():
    source = """
def count(x: f32[N]) -> (f32[N], i64):
    acc = 0.0
    k = 0
    for i in range(N):
        acc = acc + x
        k = k + 1
    return acc, k
"""
    x = np.arange(3, dtype=np.float32)
    acc, k = interpret(source, "count", x)
    np.testing.assert_array_equal(acc, 3 * x)
    assert k == 3 and k.dtype == np.int64


HEAD = "def f(x: f32[N], n: i64) -> f32[N]:\n    y = x\n"

# source, (line, col), a substring of the message
ERRORS = [
    (HEAD + "    for i in range(n):\n        y = sum(y)\n    return y\n", (4, 9),
     "'y' is f32[N] before the loop but f32 after it"),
    (HEAD + "    if n > 0:\n        y = x\n    else:\n        y = sum(x)\n    return y\n", (3, 5),
     "the branches give 'y' different types: f32[N] (then, line 4) and f32 (else, line 6)"),
    (HEAD + "    if x > 0.0:\n        y = x\n    return y\n", (3, 8),
     "the condition of a if statement must be a scalar bool, got tensor bool[N]; reduce it with any() or all()"),
    (HEAD + "    while sum(y):\n        y = y / 2.0\n    return y\n", (3, 11),
     "the condition of a while loop must be a scalar bool, got tensor f32"),
    (HEAD + "    for i in range(n):\n        y = y + 1.0\n    return y * i\n", (5, 16),
     "the loop counter 'i' is only defined inside its loop"),
    (HEAD + "    for i in range(n):\n        z = y + 1.0\n    return z\n", (5, 12),
     "'z' is assigned inside the loop (line 4) but not before it"),
    (HEAD + "    if n > 1:\n        z = y\n    return z\n", (5, 12), "'z' is assigned only in the then branch"),
    (HEAD + "    for i in range(n):\n        return y\n    return y\n", (4, 9), "return cannot be inside"),
    (HEAD + "    for i in y:\n        y = y\n    return y\n", (3, 14), "a for loop runs over range(stop)"),
    (HEAD + "    for i in range(0.5):\n        y = y\n    return y\n", (3, 20), "range() takes integers"),
    (HEAD + "    for i in range(0, n, n):\n        y = y\n    return y\n", (3, 26),
     "the step of range() must be a nonzero integer literal"),
    (HEAD + "    y[n:] = x\n    return y\n", (3, 7), "a slice bound must be a static integer"),
    (HEAD + "    y[0:2] = x\n    return y\n", (3, 5), "cannot assign f32[N] to an element of f32[N], of shape (2,)"),
    (HEAD + "    y[0] = x\n    return y\n", (3, 5), "cannot assign f32[N] to an element of f32[N], of shape ()"),
    (HEAD + "    with y:\n        y = y\n    return y\n", (3, 5), "'with' is not supported"),
]


@pytest.mark.parametrize("source, position, message", ERRORS, ids=[e[2] for e in ERRORS])
def test_misuse_is_a_located_error(source, position, message):
    with pytest.raises(CompileError) as info:
        compile_source(source, "k.adc")
    err = info.value
    assert message in str(err)
    assert (err.loc.line, err.loc.col) == position, str(err)
