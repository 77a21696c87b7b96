"""Derivatives and batching through for, while and if, by the reference interpreter: VJPs and JVPs
against central differences in float64, second order forward-over-reverse and reverse-over-reverse
(which agree), Jacobians and batch
Jacobians, every checkpoint policy giving the same gradient, per-example trip counts batched."""
import numpy as np
import pytest

from adc.frontend import compile_source
from adc.ir.interp import run
from adc.ir.verify import verify
from adc.passes import adjoint_control_flow
from adc.passes.adjoint import vjp
from adc.passes.batch import batch
from adc.passes.jacobian import hessian, jacobian
from tests.support.gradcheck import STEP, check_jvp, check_vjp

RNG = np.random.default_rng(0)

RECURRENCE = """
def recurrence(x: f64[N], w: f64[N, N], b: f64[N], n: i64) -> (f64, f64[N]):
    h = x
    loss = 0.0
    for t in range(n, checkpoint={k}):
        h = tanh(w @ h + b * f64(t))
        loss = loss + sum(h * h) * 0.5
    return loss, h
"""

NEWTON = """
def sqrt_newton(a: f64, x0: f64) -> f64:
    x = x0
    while abs(x * x - a) > 1e-10 * a:
        x = 0.5 * (x + a / x)
    return x * x0
"""

BRANCHES = """
def branches(x: f64[N], s: f64) -> f64[N]:
    y = x
    if s > 1.0:
        y = sin(x) * s
    elif s > 0.0:
        y = x * x + s
    else:
        z = exp(x)
        y = z / (1.0 + z)
    return y
"""

NESTED = """
def nested(x: f64[N], w: f64[N, N], n: i64) -> f64[N]:
    y = x
    for i in range(n):
        for j in range(2):
            y = sin(w @ y) + x * f64(j)
        if sum(y) > 0.0:
            y = y * 0.5
    return y
"""


def recurrence(k=0):
    return compile_source(RECURRENCE.format(k=k), "recurrence.adc")


def recurrence_args(n, size=3):
    return [RNG.standard_normal(size), RNG.standard_normal((size, size)) * 0.7, RNG.standard_normal(size) * 0.1,
            np.int64(n)]


@pytest.mark.parametrize("n", [0, 1, 2, 7])
@pytest.mark.parametrize("k", [0, 1, 3])
def test_vjp_of_a_for_loop(n, k):
    check_vjp(recurrence(k), "recurrence", recurrence_args(n))


@pytest.mark.parametrize("a", [0.5, 2.0, 30.0])
def test_vjp_of_a_while_loop_with_a_data_dependent_trip_count(a):
    module = compile_source(NEWTON, "newton.adc")
    check_vjp(module, "sqrt_newton", [np.float64(a), np.float64(1.0 + a)])
    ext, grad = vjp(module, "sqrt_newton")
    da, dx0 = run(ext, grad.func.name, np.float64(a), np.float64(1.0 + a), np.float64(1.0))
    # x -> sqrt(a) whatever x0: d(x * x0)/da = x0 / (2 sqrt(a)), d/dx0 = sqrt(a) (the loop's own x0 path is flat)
    np.testing.assert_allclose([da, dx0], [(1.0 + a) / (2 * np.sqrt(a)), np.sqrt(a)], rtol=1e-6)


@pytest.mark.parametrize("s", [2.0, 0.5, -1.0])
def test_vjp_and_jvp_of_if_elif_else(s):
    module = compile_source(BRANCHES, "branches.adc")
    args = [RNG.standard_normal(4), np.float64(s)]
    check_vjp(module, "branches", args)
    check_jvp(module, "branches", args)


@pytest.mark.parametrize("n", [0, 3])
def test_nested_loops_and_a_branch_inside_a_loop(n):
    module = compile_source(NESTED, "nested.adc")
    args = [RNG.standard_normal(3), RNG.standard_normal((3, 3)) * 0.5, np.int64(n)]
    check_vjp(module, "nested", args)
    check_jvp(module, "nested", args)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_jvp_of_loops_agrees_with_differences_and_with_the_vjp(n):
    check_jvp(recurrence(), "recurrence", recurrence_args(n))
    check_jvp(compile_source(NEWTON, "newton.adc"), "sqrt_newton", [np.float64(3.0), np.float64(2.0)])


def gradient_at(module, name, args, param):
    ext, grad = vjp(module, name, [param])
    outs = run(module, name, *args)
    cts = [np.ones_like(o) if np.issubdtype(o.dtype, np.floating) else np.zeros_like(o) for o in outs]
    return run(ext, grad.func.name, *args, *cts)[0]


FOR_THEN_WHILE = """
def for_then_while(x: f64[N], w: f64[N, N], n: i64) -> f64:
    h = x
    total = 0.0
    for t in range(n, checkpoint=1):
        h = tanh(w @ h) + x
        total = total + sum(h * h)
    k = 0
    while total > 10.0:
        total = total * 0.5
        k += 1
    return total + f64(k)
"""

SCALAR = {   # a scalar of each kernel above, what a Hessian takes
    "recurrence": "def scalar(x: f64[N], w: f64[N, N], b: f64[N], n: i64) -> f64:\n"
                  "    loss, h = recurrence(x, w, b, n)\n    return loss + sum(sin(h))\n",
    "branches": "def scalar(x: f64[N], s: f64) -> f64:\n    return sum(branches(x, s) * x)\n",
    "sqrt_newton": "def scalar(a: f64, x0: f64) -> f64:\n    return sqrt_newton(a, x0) * a\n",
    "for_then_while": "def scalar(x: f64[N], w: f64[N, N], n: i64) -> f64:\n    return for_then_while(x, w, n)\n"}


@pytest.mark.parametrize("source, name, args", [
    (RECURRENCE.format(k=0), "recurrence", recurrence_args(4)),
    (NEWTON, "sqrt_newton", [np.float64(3.0), np.float64(2.0)]),
    (BRANCHES, "branches", [RNG.standard_normal(3), np.float64(0.5)]),
    (BRANCHES, "branches", [RNG.standard_normal(3), np.float64(-1.0)]),
], ids=["for", "while", "if", "else"])
def test_second_order_forward_over_reverse_matches_differences_of_the_gradient(source, name, args):
    module = compile_source(source + "\n" + SCALAR[name], f"{name}.adc")
    name = "scalar"
    ext, func = hessian(module, name, 0)
    got = run(ext, func.name, *args)[0]
    x = np.asarray(args[0], float)
    columns = []
    for index in np.ndindex(x.shape or (1,)):
        e = np.zeros(x.shape)
        e[index[:x.ndim]] = STEP
        plus = gradient_at(module, name, [x + e, *args[1:]], 0)
        minus = gradient_at(module, name, [x - e, *args[1:]], 0)
        columns.append((plus - minus) / (2 * STEP))
    expected = np.moveaxis(np.array(columns).reshape(x.shape + x.shape), tuple(range(x.ndim)),
                           tuple(range(x.ndim, 2 * x.ndim))) if x.ndim else np.array(columns).reshape(())
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("source, name, args", [
    (RECURRENCE.format(k=0), "recurrence", recurrence_args(4)),
    (RECURRENCE.format(k=1), "recurrence", recurrence_args(4)),
    (RECURRENCE.format(k=3), "recurrence", recurrence_args(7)),
    (NEWTON, "sqrt_newton", [np.float64(3.0), np.float64(2.0)]),
    (BRANCHES, "branches", [RNG.standard_normal(3), np.float64(0.5)]),
], ids=["for", "for-stored", "for-segments", "while", "if"])
def test_reverse_over_reverse_equals_the_forward_over_reverse_hessian(source, name, args):
    """The VJP of the gradient (a reversed loop's recording scans reversed in turn) contracts the
    Hessian with a cotangent: Hᵀc, as forward-over-reverse gives it, and, w.r.t. the gradient's
    own cotangent, the gradient's dot product with c."""
    module = compile_source(source + "\n" + SCALAR[name], f"{name}.adc")
    ext, grad = vjp(module, "scalar", [0])
    ext2, second = vjp(ext, grad.func.name)
    x = np.asarray(args[0], float)
    c = RNG.standard_normal(x.shape)
    got = run(ext2, second.func.name, *args, np.float64(1.0), c)
    hext, hfunc = hessian(module, "scalar", 0)
    h = np.asarray(run(hext, hfunc.name, *args)[0])
    np.testing.assert_allclose(got[0], np.tensordot(c, h, axes=x.ndim), rtol=1e-9, atol=1e-12)
    gradient = run(ext, grad.func.name, *args, np.float64(1.0))[0]
    np.testing.assert_allclose(got[-1], np.sum(gradient * c), rtol=1e-9, atol=1e-12)


def test_every_checkpoint_policy_gives_the_same_gradient(monkeypatch):
    args = recurrence_args(10)
    cts = [np.float64(0.7), RNG.standard_normal(3)]

    def gradient(k):
        module, grad = vjp(recurrence(k), "recurrence")
        return run(module, grad.func.name, *args, *cts)

    reference = gradient(1)
    for k in (2, 3, 4, 9, 10, 11, 0):
        for got, want in zip(gradient(k), reference, strict=True):
            np.testing.assert_array_equal(got, want)
    monkeypatch.setattr(adjoint_control_flow, "STORE_ALL_BYTES", 0)      # the default becomes sqrt(n) segments
    for got, want in zip(gradient(0), reference, strict=True):
        np.testing.assert_array_equal(got, want)


def test_checkpoint_1_stores_residuals_and_recomputes_nothing():
    """With every iteration stored, the backward runs the second half of the body's split VJP:
    the derivative holds the forward's one matrix product and the backward's two (w.r.t. w and
    h), where replaying the body's forward in each backward step would add a fourth."""
    module, grad = vjp(recurrence(1), "recurrence")
    reachable = module.reachable(grad.func.name)
    products = [op for func in reachable for op in func.ops if op.name == "matmul"]
    assert len(products) == 3, [func.name for func in reachable]


def test_jacobian_through_a_loop():
    module = compile_source(RECURRENCE.format(k=2) + "\ndef final(x: f64[N], w: f64[N, N], b: f64[N], n: i64) -> "
                            "f64[N]:\n    loss, h = recurrence(x, w, b, n)\n    return h\n", "final.adc")
    args = recurrence_args(5)
    for mode in ("forward", "reverse"):
        ext, func, wrt = jacobian(module, "final", [0, 1], mode=mode)
        verify(ext)
        d_x, d_w = run(ext, func.name, *args)
        for i, (arg, got) in enumerate(zip(args[:2], (d_x, d_w))):
            for index in np.ndindex(arg.shape):
                e = np.zeros(arg.shape)
                e[index] = STEP
                moved = [[a + sign * e if j == i else a for j, a in enumerate(args)] for sign in (1, -1)]
                column = (run(module, "final", *moved[0])[0] - run(module, "final", *moved[1])[0]) / (2 * STEP)
                np.testing.assert_allclose(got[(...,) + index], column, rtol=1e-6, atol=1e-9, err_msg=mode)


def test_batch_jacobian_through_a_loop_with_per_example_trip_counts():
    """Batching a loop whose trip count differs per example runs the longest and keeps each
    example's values once its own count is reached; the batched VJP gives per-example gradients."""
    module = recurrence()
    ext, grad = vjp(module, "recurrence", [0])
    batched, func = batch(ext, grad.func.name, [True, False, False, True, True, True])
    xs, counts = RNG.standard_normal((4, 3)), np.array([0, 3, 1, 5])
    _, w, b, _ = recurrence_args(0)
    cts = (RNG.standard_normal(4), RNG.standard_normal((4, 3)))
    (got,) = run(batched, func.name, xs, w, b, counts, *cts)
    for e in range(4):
        (want,) = run(ext, grad.func.name, xs[e], w, b, counts[e], cts[0][e], cts[1][e])
        np.testing.assert_allclose(got[e], want, rtol=1e-12, atol=1e-14)


def test_a_while_whose_trip_count_differs_per_example_is_batched_by_masking():
    module = compile_source(NEWTON, "newton.adc")
    out, func = batch(module, "sqrt_newton", [True, False])
    a = np.array([0.25, 4.0, 100.0, 1e4])
    np.testing.assert_allclose(run(out, func.name, a, np.float64(3.0))[0], np.sqrt(a) * 3.0, rtol=1e-9)
    for e in range(4):
        assert run(out, func.name, a, np.float64(3.0))[0][e] == run(module, "sqrt_newton", a[e], np.float64(3.0))[0]


@pytest.mark.parametrize("source, name, args", [
    (RECURRENCE.format(k=0), "recurrence", recurrence_args(4)),
    (RECURRENCE.format(k=3), "recurrence", recurrence_args(7)),
    (NEWTON, "sqrt_newton", [np.float64(3.0), np.float64(2.0)]),
    (FOR_THEN_WHILE, "for_then_while", [RNG.standard_normal(4), RNG.standard_normal((4, 4)) * 0.6, np.int64(9)]),
], ids=["for", "for-segments", "while", "for-then-while"])
def test_reverse_over_reverse_batched_over_cotangents_gives_the_hessian(source, name, args):
    """The VJP of the gradient batched over its cotangent (a jacobian of the gradient, as an
    outer tape takes it), fed the identity: each row is a row of the Hessian. A reversed loop's
    recording, batched and pruned, still binds the lengths the rest reads."""
    module = compile_source(source + "\n" + SCALAR[name], f"{name}.adc")
    ext, grad = vjp(module, "scalar", [0])
    ext2, second = vjp(ext, grad.func.name)
    n_params = len(second.func.params)
    bext, batched = batch(ext2, second.func.name, [False] * (n_params - 1) + [True], axis_name="S")
    verify(bext)
    x = np.asarray(args[0], float)
    seeds = np.eye(x.size).reshape((x.size, *x.shape))
    got = np.asarray(run(bext, batched.name, *args, np.float64(1.0), seeds)[0])
    hext, hfunc = hessian(module, "scalar", 0)
    h = np.asarray(run(hext, hfunc.name, *args)[0]).reshape(x.size, x.size)
    np.testing.assert_allclose(got.reshape(x.size, x.size), h.T, rtol=1e-9, atol=1e-12)


LOOP_HEADS = {"for": "for k{} in range(2):", "while": "while x[0] < {}.5:"}


def _loop_nest(depth: int, loop: str = "for") -> str:
    return ("def nest(x: f64[N]) -> f64[N]:\n"
            + "".join("    " * (level + 1) + LOOP_HEADS[loop].format(level) + "\n" for level in range(depth))
            + "    " * (depth + 1) + "x = x * 1.1 + sin(x) * 0.1 + 0.5\n    return x\n")


@pytest.mark.parametrize("loop", LOOP_HEADS)
def test_a_nest_of_loops_differentiates_to_code_that_grows_with_the_square_of_its_depth(loop):
    """A reversed loop runs its body's VJP in both reversals (stored steps, segments): derived,
    pruned, hoisted, inlined and sized path by path, a nest's backward doubled or more per level
    (for loops 3 -> 6 deep: 22,726 -> 280,662 lines of LLVM IR). Once per region, it grows with
    the square of the depth."""
    from adc import compiler
    from adc.codegen.toolchain.target import Target

    def backward_lines(depth: int) -> int:
        module = compiler.elaborate(_loop_nest(depth, loop), "nest.adc")
        split = compiler.derive(compiler.kernel_sources(module).ir, "nest.adc", "split_vjp", "nest", None)
        llvm = compiler.lower_kernel(compiler.kernel_sources(split.module).ir, "nest.adc", split.function.name,
                                     Target.host())
        return len(str(llvm).splitlines())

    assert backward_lines(6) < 6 * backward_lines(3)


@pytest.mark.parametrize("loop", LOOP_HEADS)
def test_the_gradient_through_a_nest_of_loops_matches_differences(loop):
    check_vjp(compile_source(_loop_nest(5, loop), "nest.adc"), "nest", [RNG.standard_normal(3)])
