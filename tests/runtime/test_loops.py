"""Kernels with loops and branches through the runtime: compiled gradients equal the reference
interpreter's, every checkpoint policy gives bit-identical compiled gradients, a tape records
them, and a shared object carries their VJPs."""
import subprocess
import sys

import numpy as np
import pytest

import adc
from adc.frontend import compile_source
from adc.ir.interp import run
from adc.passes.adjoint import vjp
from tests.support.indexed_when_run import INDEXED_WHEN_RUN

SOURCE = """
def loss(x: f64[N], w: f64[N, N], n: i64) -> f64:
    h = x
    total = 0.0
    for t in range({range}):
        h = tanh(w @ h) + x
        if sum(h) > 0.0:
            total = total + sum(h * h)
        else:
            total = total - sum(h)
    k = 0
    while total > 10.0:
        total = total * 0.5
        k += 1
    return total + f64(k)
"""
RNG = np.random.default_rng(3)
ARGS = (RNG.standard_normal(4), RNG.standard_normal((4, 4)) * 0.6, 9)


@pytest.mark.parametrize("policy", ["n", "n, checkpoint=1", "n, checkpoint=4"])
def test_compiled_gradients_equal_the_interpreter(policy):
    source = SOURCE.format(range=policy)
    gradient = adc.grad(adc.compile(source, "loops.adc").loss, wrt=("x", "w"))
    got = [g.numpy() for g in gradient(*ARGS)]
    module = compile_source(source, "loops.adc")
    ext, grad = vjp(module, "loss", [0, 1])
    want = run(ext, grad.func.name, *ARGS[:2], np.int64(ARGS[2]), np.float64(1.0))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_every_checkpoint_policy_compiles_to_the_same_gradient():
    results = []
    for policy in ("n", "n, checkpoint=1", "n, checkpoint=2", "n, checkpoint=5", "n, checkpoint=100"):
        gradient = adc.grad(adc.compile(SOURCE.format(range=policy), "loops.adc").loss, wrt=("x", "w"))
        results.append([g.numpy() for g in gradient(*ARGS)])
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_a_tape_records_a_loop_and_forward_over_backward_gives_hessian_vector_products():
    """TensorFlow's Hessian-vector product recipe, a ForwardAccumulator over a GradientTape, through
    a loop."""
    kernel = adc.compile(SOURCE.format(range="n"), "loops.adc").loss
    x, v = adc.Variable(ARGS[0]), RNG.standard_normal(4)
    with adc.ForwardAccumulator(x, v) as acc:
        with adc.GradientTape() as tape:
            y = kernel(x, ARGS[1], ARGS[2])
        g = tape.gradient(y, x)
    np.testing.assert_allclose(acc.jvp(g).numpy(), _hessian_by_differences(kernel) @ v, rtol=1e-5, atol=1e-7)


def _hessian_by_differences(kernel, step=1e-6):
    """d gradient / d x by central differences of the compiled gradient, (4, 4)."""
    gradient = adc.grad(kernel, wrt="x")
    return np.array([(gradient(ARGS[0] + step * e, *ARGS[1:]).numpy() - gradient(ARGS[0] - step * e, *ARGS[1:]).numpy())
                     / (2 * step) for e in np.eye(4)]).T


@pytest.mark.parametrize("policy", ["n", "n, checkpoint=1", "n, checkpoint=3"])
def test_nested_tapes_through_loops_and_branches_give_hessian_products(policy):
    """Reverse over reverse, as the guide takes second derivatives: the outer tape differentiates
    the inner gradient (reversed for, while and if; the reversal's recording scans reversed in
    turn)."""
    kernel = adc.compile(SOURCE.format(range=policy), "loops.adc").loss
    x, c = adc.Variable(ARGS[0]), RNG.standard_normal(4)
    with adc.GradientTape() as outer:
        with adc.GradientTape() as inner:
            y = kernel(x, ARGS[1], ARGS[2])
        z = adc.reduce_sum(inner.gradient(y, x) * c)
    np.testing.assert_allclose(outer.gradient(z, x).numpy(), _hessian_by_differences(kernel).T @ c,
                               rtol=1e-5, atol=1e-6)


FOR_IF = SOURCE[:SOURCE.index("    k = 0")] + "    return total\n"


@pytest.mark.parametrize("source, policy", [(FOR_IF, "n"), (FOR_IF, "n, checkpoint=1"), (FOR_IF, "n, checkpoint=3"),
                                            (SOURCE, "n, checkpoint=1")],
                         ids=["for-if", "for-if-checkpoint-1", "for-if-checkpoint-3", "for-if-while-checkpoint-1"])
def test_the_jacobian_of_a_gradient_through_loops_by_nested_tapes_is_the_hessian(source, policy):
    """The guide's Hessian recipe, an outer tape's jacobian (batched) of an inner tape's gradient,
    through a for loop holding an if, and then a while (whose reversal's recording, batched, keeps
    the scan that binds its length). The while's reversal is the same for every policy of the for."""
    kernel = adc.compile(source.format(range=policy), "loops.adc").loss
    x = adc.Variable(ARGS[0])
    with adc.GradientTape() as outer:
        with adc.GradientTape() as inner:
            y = kernel(x, ARGS[1], ARGS[2])
        g = inner.gradient(y, x)
    np.testing.assert_allclose(outer.jacobian(g, x).numpy(), _hessian_by_differences(kernel), rtol=1e-5, atol=1e-6)


def test_a_shared_object_carries_the_vjp_of_a_loop(tmp_path):
    path = tmp_path / "loops.adc"
    path.write_text(SOURCE.format(range="n"))
    so = tmp_path / "loops.so"
    subprocess.run([sys.executable, "-m", "adc", "compile", str(path), "-o", str(so)], check=True,
                   capture_output=True, text=True)
    module = adc.load(so)
    x = adc.Variable(ARGS[0])
    with adc.GradientTape() as tape:
        y = module.loss(x, *ARGS[1:])
    got = tape.gradient(y, x).numpy()
    want = adc.grad(adc.compile(SOURCE.format(range="n"), "loops.adc").loss, wrt="x")(*ARGS).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda m: m.branch(np.zeros(0), -1.0), r"branch: .* needs M-1 >= 0, but M = 0"),
    (lambda m: m.body(np.zeros(5), 2), r"body: .* needs M-6 >= 0, but M = 5"),
    (lambda m: m.caller(np.zeros(3)), r"caller: .* needs M-4 >= 0, but M = 3"),
    (lambda m: m.unread_caller(np.zeros(3)), r"unread_caller: .* needs M-4 >= 0, but M = 3"),
    (lambda m: m.unread(np.zeros(3)), r"unread: the shapes need M-4 >= 0, but M = 3"),
])
def test_an_index_in_a_branch_loop_or_callee_that_runs_is_checked_when_it_runs(call, message):
    """Native code checks the sizes a loop body, a branch or an inlined kernel needs when it gets
    there (the call boundary cannot ask them of every call): a ValueError naming what they need,
    never a read out of bounds. An index no result reads, and a call of a kernel that has one,
    need the sizes as the interpreter's run of the source does."""
    module = adc.compile(INDEXED_WHEN_RUN, "indexed.adc")
    with pytest.raises(ValueError, match=message):
        call(module)


def test_an_index_in_a_branch_or_loop_that_does_not_run_needs_nothing():
    module = adc.compile(INDEXED_WHEN_RUN, "indexed.adc")
    assert module.branch(np.zeros(0), 2.0).numpy() == 2.0
    assert module.guarded(np.zeros(0)).numpy() == 0.0
    assert module.guarded(np.array([7.0])).numpy() == 7.0
    assert module.body(np.zeros(1), 0).numpy() == 0.0
    assert module.body(np.arange(6.0), 2).numpy() == 10.0


def test_the_interpreter_checks_the_same_sizes_when_a_region_or_callee_runs():
    module = compile_source(INDEXED_WHEN_RUN, "indexed.adc")
    with pytest.raises(ValueError, match=r"@branch_if0: the shapes need M-1 >= 0, but M = 0"):
        run(module, "branch", np.zeros(0), np.float64(-1.0))
    with pytest.raises(ValueError, match=r"@first: the shapes need M-4 >= 0, but M = 3"):
        run(module, "caller", np.zeros(3))
    with pytest.raises(ValueError, match=r"@unread: the shapes need M-4 >= 0, but M = 3"):
        run(module, "unread_caller", np.zeros(3))
    assert run(module, "guarded", np.zeros(0))[0] == 0.0


def test_a_loop_body_whose_index_goes_unread_differentiates():
    """The VJP's loop body, pruned to what the gradient reads, loses the parameter its dead x[0] read:
    dead code elimination keeps no check of a value the function no longer has (it kept one, and the
    verifier stopped the compile)."""
    kernel = adc.compile("def f(x: f64[N]) -> f64:\n    t = x[0]\n    for _ in range(0):\n"
                         "        t = tanh(x[0])\n    return t\n", "unread_in_loop.adc").f
    x = adc.Variable(np.array([0.5, 2.0]))
    with adc.GradientTape() as tape:
        y = kernel(x)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [1.0, 0.0])


def test_a_loop_of_constants_differentiates():
    """The loop's state starts from a constant: simplify must not fold the loop (its body is a
    function of the module) while the tape derives the split VJP."""
    kernel = adc.compile("""
def f(x: f64[M]) -> (f64[M], f64):
    t = reshape(full([1], 0.5, dtype=f64), [])
    for _ in range(2):
        t = tanh(t)
    return x * 2.0, t
""", "constant_loop.adc").f
    x = adc.constant(np.ones(3))
    with adc.GradientTape() as tape:
        tape.watch(x)
        y, t = kernel(x)
    np.testing.assert_allclose(tape.gradient([y, t], x).numpy(), 2.0 * np.ones(3))
    np.testing.assert_allclose(t.numpy(), np.tanh(np.tanh(0.5)))


TRAJECTORY = """
def trajectory(x0: f64[P], n: i64, out: f64[T, P]) -> (f64[T, P], f64[P]):
    x = x0
    y = out
    for t in range(n):
        x = x * 0.5 + 1.0
        y[t] = x
    return y, x

def halvings(x0: f64[P], out: f64[T, P]) -> f64[T, P]:
    x = x0
    y = out
    k = 0
    while k < T:
        x = x * 0.5
        y[k] = x
        k += 1
    return y

def doubled(x0: f64[P], n: i64, out: f64[T, P]) -> f64[T, P]:
    y = out
    for t in range(n):
        y[t] = y[t] * 2.0 + x0
    return y
"""


@pytest.mark.parametrize("n", [0, 1, 2, 5, 6])
def test_a_trajectory_written_in_place_keeps_every_row(n):
    """`y[t] = x` updates the loop's one buffer of y in place (the body's scatter does not copy y
    into itself): every row written, the others as given, for odd and even trip counts, in a
    for and a while, and where the body also reads y (a copy per iteration, as before)."""
    module = adc.compile(TRAJECTORY, "trajectory.adc")
    out, x0 = np.full((6, 2), -7.0), np.array([1.0, 4.0])
    want, x = out.copy(), x0.copy()
    for t in range(n):
        x = x * 0.5 + 1.0
        want[t] = x
    y, last = module.trajectory(x0, n, out)
    np.testing.assert_array_equal(y.numpy(), want)
    np.testing.assert_array_equal(last.numpy(), x)
    np.testing.assert_array_equal(out, np.full((6, 2), -7.0))      # the argument is not written
    halved = module.halvings(x0, np.zeros((n, 2))).numpy()
    np.testing.assert_array_equal(halved, x0 * 0.5 ** np.arange(1, n + 1)[:, None])
    doubled = out.copy()
    doubled[:n] = doubled[:n] * 2.0 + x0
    np.testing.assert_array_equal(module.doubled(x0, n, out).numpy(), doubled)


def test_the_gradient_through_a_trajectory_equals_the_interpreter():
    source = TRAJECTORY
    out, x0 = np.zeros((5, 2)), np.array([1.0, 4.0])
    kernel = adc.compile(source, "trajectory.adc").trajectory
    x, y = adc.constant(x0), adc.constant(out)
    with adc.GradientTape() as tape:
        tape.watch([x, y])
        traj, last = kernel(x, 5, y)
        loss = adc.reduce_sum(traj * traj) + adc.reduce_sum(last)
    got = [g.numpy() for g in tape.gradient(loss, [x, y])]
    module = compile_source(source, "trajectory.adc")
    ext, grad = vjp(module, "trajectory", [0, 2])
    traj_want, last_want = run(module, "trajectory", x0, np.int64(5), out)
    want = run(ext, grad.func.name, x0, np.int64(5), out, 2 * traj_want, np.ones(2))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)
