"""The operators and syntax of everyday array code — % // & | ^ ~ and or not, chained comparisons,
`a if c else b`, .T, None and ... in indexing, augmented assignment, pi e inf nan — compiled and
run natively, against NumPy evaluating the same text (f32, f64 and integer dtypes, broadcasting,
zero sizes, nan and inf, negative operands), plus their gradients and their errors.
"""
import numpy as np
import pytest

import adc
from adc.frontend import compile_source
from tests.support.gradcheck import check_vjp

RNG = np.random.default_rng(11)
NUMPY = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "bool": np.bool_}


def run(source: str, *args) -> np.ndarray:
    """The one result of kernel `f` of `source`, compiled and called."""
    return adc.compile(source, "ops.adc").f(*args).numpy()


def operands(dtype: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """x: [n, 3] and y: [3], with zeros, signs, and for floats nan, inf and -0.0 among them."""
    if dtype in ("i32", "i64"):
        x = RNG.integers(-20, 20, (n, 3))
        y = np.array([0, 3, -4])
    else:
        edges = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 7.5, -7.5, 1e30])
        x = np.r_[RNG.standard_normal(3 * n) * 10, edges][:3 * n].reshape(n, 3) if n else np.empty((0, 3))
        y = np.array([0.75, -2.5, 0.0])
    return x.astype(NUMPY[dtype]), y.astype(NUMPY[dtype])


@pytest.mark.parametrize("n", [0, 5])
@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64"])
@pytest.mark.parametrize("op, oracle", [("%", np.mod), ("//", np.floor_divide)])
def test_mod_and_floor_div_broadcast_as_numpy(op, oracle, dtype, n):
    x, y = operands(dtype, n)
    got = run(f"def f(x: {dtype}[N, 3], y: {dtype}[3]) -> {dtype}[N, 3]:\n    return x {op} y\n", x, y)
    with np.errstate(all="ignore"):
        want = oracle(x, y)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("text, want", [("7 % -3", -2), ("-7 // 2", -4), ("-7.5 % 2.0", 0.5), ("7.0 // -2", -4.0)])
def test_mod_and_floor_div_of_literals_fold_as_python(text, want):
    got = run(f"def f(x: f64) -> f64:\n    return x * 0.0 + ({text})\n", np.float64(1.0))
    assert got == want


@pytest.mark.parametrize("dtype", ["bool", "i32", "i64"])
@pytest.mark.parametrize("op", ["&", "|", "^"])
def test_bitwise_operators(op, dtype):
    x, y = (RNG.integers(-100, 100, shape).astype(NUMPY[dtype]) for shape in [(4, 3), (3,)])
    got = run(f"def f(x: {dtype}[N, 3], y: {dtype}[3]) -> {dtype}[N, 3]:\n    return x {op} y {op} ~y\n", x, y)
    np.testing.assert_array_equal(got, eval(f"x {op} y {op} ~y"))


def test_logical_operators_are_elementwise_on_bools():
    a, b = RNG.random((5, 2)) < 0.5, RNG.random(2) < 0.5
    source = ("def f(a: bool[N, 2], b: bool[2]) -> bool[N, 2]:\n"
              "    return not a and b or a and not b or True and not True\n")
    np.testing.assert_array_equal(run(source, a, b), (~a & b) | (a & ~b))


def test_chained_comparisons():
    x = np.linspace(-2, 2, 9)
    got = run("def f(x: f64[N]) -> bool[N]:\n    return -1 < x <= 1 != x\n", x)
    np.testing.assert_array_equal(got, (-1 < x) & (x <= 1) & (x != 1))


def test_conditional_expression_broadcasts_as_where():
    x, c = RNG.standard_normal((4, 3)).astype(np.float32), RNG.random((4, 1)) < 0.5
    got = run("def f(x: f32[N, 3], c: bool[N, 1]) -> f32[N, 3]:\n    return x * 2 if c else -1.5\n", x, c)
    np.testing.assert_array_equal(got, np.where(c, x * 2, np.float32(-1.5)))
    assert got.dtype == np.float32


@pytest.mark.parametrize("shape", [(), (4,), (2, 3), (2, 3, 4)])
def test_dot_t_reverses_every_axis(shape):
    x = RNG.standard_normal(shape)
    dims = "".join(f"[{', '.join(map(str, shape))}]" if shape else "")
    result = "".join(f"[{', '.join(map(str, shape[::-1]))}]" if shape else "")
    np.testing.assert_array_equal(run(f"def f(x: f64{dims}) -> f64{result}:\n    return x.T\n", x), x.T)


@pytest.mark.parametrize("index", ["x[None]", "x[:, None]", "x[..., None]", "x[None, ..., None]", "x[...]",
                                   "x[..., 1]", "x[..., 1:3]", "x[1, ..., 2]", "x[..., -1, ::2]", "x[0, None, 1:4:2]",
                                   "x[None, 1][..., 0]", "x[:, None, :, None][..., 0, 2]", "x.T[..., None, 0]"])
def test_new_axes_and_ellipsis_index_as_numpy(index):
    x = RNG.standard_normal((3, 4, 5))
    want = eval(index)
    result = f"f64[{', '.join(map(str, want.shape))}]" if want.shape else "f64"
    got = run(f"def f(x: f64[3, 4, 5]) -> {result}:\n    return {index}\n", x)
    np.testing.assert_array_equal(got, want)


AUGMENTED = [("f64", op, "1.5") for op in ("+", "-", "*", "/", "**", "%", "//")]
AUGMENTED += [("i64", op, "y") for op in ("+", "-", "*", "%", "//", "&", "|", "^")]
AUGMENTED += [("bool", op, "y") for op in ("&", "|", "^")]


@pytest.mark.parametrize("dtype, op, operand", AUGMENTED)
def test_augmented_assignment_rebinds_the_name(dtype, op, operand):
    x = (np.abs(RNG.standard_normal((4, 3))) * 5).astype(NUMPY[dtype])
    y = RNG.integers(-3, 4, 3).astype(NUMPY[dtype])
    source = (f"def f(x: {dtype}[N, 3], y: {dtype}[3]) -> {dtype}[N, 3]:\n"
              f"    z = x\n    z {op}= {operand}\n    z {op}= {operand}\n    return z\n")
    want = x.copy()
    with np.errstate(all="ignore"):
        for _ in range(2):
            want = eval(f"want {op} {operand}").astype(want.dtype)
    if op == "**":      # pow is within an ulp of NumPy's, whose own last bit depends on its build
        np.testing.assert_allclose(run(source, x, y), want, rtol=4e-16, atol=0)
    else:
        np.testing.assert_array_equal(run(source, x, y), want)


def test_augmented_assignment_of_a_number_takes_a_dtype():
    x = np.arange(4.0, dtype=np.float32)
    got = run("def f(x: f32[N]) -> f32:\n    acc = 0.5\n    acc += sum(x)\n    acc *= 2\n    return acc\n", x)
    assert got.dtype == np.float32 and got == 13.0


def test_constants_are_weak_and_shadowed_by_names():
    x = np.array([1.0, -2.0], np.float32)
    got = run("def f(x: f32[N]) -> f32[N]:\n    return x * pi + e - minimum(x * inf, nan) * 0.0\n", x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(got), [True, True])
    got = run("def f(x: f32[N]) -> f32[N]:\n    return x * pi + e\n", x)
    np.testing.assert_allclose(got, x * np.float32(np.pi) + np.float32(np.e), rtol=1e-7)
    shadowed = "def f(x: f64[N], e: f64) -> f64[N]:\n    pi = 3.0\n    return x * pi + e\n"
    np.testing.assert_array_equal(run(shadowed, x.astype(np.float64), np.float64(0.5)), x * 3.0 + 0.5)


def test_integer_division_by_zero_of_a_literal_is_a_compile_error_not_a_trap():
    # a zero divisor in a tensor gives 0 (NumPy's value); between literals it is a located error, as `/`
    with pytest.raises(adc.CompileError, match="division by zero") as info:
        compile_source("def f(x: i32) -> i32:\n    return x + 7 // 0\n", "z.adc")
    assert (info.value.loc.line, info.value.loc.col) == (2, 16)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("name, oracle", [("square", np.square), ("reciprocal", np.reciprocal), ("isnan", np.isnan),
                                          ("isinf", np.isinf), ("isfinite", np.isfinite)])
def test_elementwise_builtins(name, oracle, dtype):
    x = np.array([0.0, -0.0, 1.5, -3.0, 1e30, 1e-30, np.inf, -np.inf, np.nan], NUMPY[dtype])
    with np.errstate(all="ignore"):
        want = oracle(x)
    result = f"{'bool' if want.dtype == np.bool_ else dtype}[N]"
    got = run(f"def f(x: {dtype}[N]) -> {result}:\n    return {name}(x)\n", x)
    np.testing.assert_array_equal(got, want)


# gradients: the new syntax expands to differentiable ops, first and second order in float64
GRADIENTS = {
    "mod": "def f(x: f64[3, 4], y: f64[4]) -> f64[3, 4]:\n    return x % y\n",
    "mod_square": "def f(x: f64[3, 4], y: f64[4]) -> f64[3, 4]:\n    return (x * x) % (y * y)\n",
    "floor_div": "def f(x: f64[3, 4], y: f64[4]) -> f64[3, 4]:\n    return x * (x // y)\n",
    "conditional": "def f(x: f64[3, 4], y: f64[4]) -> f64[3, 4]:\n    return x * y if x > y else x - y * y\n",
    "dot_t": "def f(x: f64[3, 4], y: f64[4]) -> f64[4, 3]:\n    return (x * x).T * y[:, None]\n",
    "ellipsis": "def f(x: f64[3, 4], y: f64[4]) -> f64[3]:\n    return x[..., 1] * x[None, ..., 2][0] * y[..., -1]\n",
    "augmented": ("def f(x: f64[3, 4], y: f64[4]) -> f64[3, 4]:\n    z = x\n    z *= y\n    z += x * pi\n"
                  "    z /= 1.5\n    z **= 2\n    z -= y % 0.75\n    return z\n"),
}


@pytest.mark.parametrize("case", sorted(GRADIENTS))
def test_gradients_first_and_second_order(case):
    rng = np.random.default_rng(5)
    # away from the jumps of % and //: x / y is never within 0.05 of an integer
    y = rng.choice([-1.0, 1.0], 4) * rng.uniform(0.6, 1.4, 4)
    x = (rng.integers(-3, 3, (3, 4)) + rng.uniform(0.1, 0.9, (3, 4))) * np.abs(y)
    check_vjp(compile_source(GRADIENTS[case], f"{case}.adc"), "f", [x, y], order=2, rtol=1e-5, atol=1e-7)


def test_gradient_of_mod_is_one_and_minus_the_floored_quotient():
    # d(x % y) = (ct, -ct * floor(x / y)), computed here without adc
    x, y = np.array([7.5, -7.5, 2.0]), np.array([2.0, 2.0, -0.75])
    kernel = adc.compile("def f(x: f64[N], y: f64[N]) -> f64:\n    return sum(x % y)\n").f
    gx, gy = adc.grad(kernel, wrt=(0, 1))(x, y)
    np.testing.assert_array_equal(gx.numpy(), np.ones(3))
    np.testing.assert_array_equal(gy.numpy(), -np.floor(x / y))
