"""A region's block of temporaries is as large as what the region writes into it.

A loop body's temporaries are a part of its parent's block, sized by the parent. The parent
once sized it from fusion's plan of the body in source order, while the body laid itself out
from its plan with its scalar results' ops moved last, which materializes more: the reversed
body of a damped oscillator wrote past the end of its block. The values came out right and
the heap was damaged, so these tests look at the heap (glibc's checks, valgrind), and the
values against finite differences of a NumPy twin.
"""
import numpy as np
import pytest

import adc
from tests.support import memcheck

OSCILLATOR = """
def f(q0: f64, dt: f64, force: f64[T]) -> f64[T]:
    q = q0
    p = q0
    traj = zeros([T], dtype=f64)
    for i in range(T{checkpoint}):
        p = p + dt * (force[i] {first} q {second} p)
        q = q + dt * p
        traj[i] = q
    return traj
"""

# A scalar recurrence written into a vector it then sums: the same class, another shape.
RING = """
def f(q0: f64, dt: f64, force: f64[T], h0: f64[D]) -> f64[T]:
    q = q0
    p = q0
    h = h0
    traj = zeros([T], dtype=f64)
    for i in range(T):
        p = p + dt * (force[i] - q - p)
        q = q + dt * p
        h[i % D] = p
        traj[i] = sum(h)
    return traj
"""

LOSS = """
def loss(q0: f64, dt: f64, force: f64[T]) -> f64:
    q = q0
    p = q0
    for i in range(T{checkpoint}):
        p = p + dt * (force[i] - q - p)
        q = q + dt * p
    return q * q + p
"""

SIZES = (0, 1, 2, 40, 1000)

# Every sign of each term, each watched argument, each size; checkpointed and stored reversals;
# second order through the loop. One child process: its heap is walked once, at the end.
VARIANTS = f"""
import itertools
import numpy as np
import adc
rng = np.random.default_rng(0)
for checkpoint, first, second in itertools.product(["", ", checkpoint=1", ", checkpoint=3"], "+-", "+-"):
    m = adc.compile({OSCILLATOR!r}.format(checkpoint=checkpoint, first=first, second=second))
    for n in {SIZES!r}:
        for wrt in range(3):
            args = [adc.Variable(np.float64(0.3)), adc.Variable(np.float64(0.05)), adc.Variable(rng.standard_normal(n))]
            with adc.GradientTape() as tape:
                y = m.f(*args)
            tape.gradient(y, args[wrt], output_gradients=np.ones(n))
ring = adc.compile({RING!r})
for n in {SIZES!r}:
    x = adc.Variable(rng.standard_normal(n))
    with adc.GradientTape() as tape:
        y = ring.f(0.3, 0.05, x, np.zeros(5))
    tape.gradient(y, x, output_gradients=np.ones(n))
for checkpoint in ("", ", checkpoint=1", ", checkpoint=3"):
    m = adc.compile({LOSS!r}.format(checkpoint=checkpoint))
    for n in (1, 2, 40):
        x = rng.standard_normal(n)
        adc.hessian(m.loss, wrt=2)(0.3, 0.05, x)
        adc.hessian(m.loss, wrt=2, mode="reverse")(0.3, 0.05, x)
        adc.hvp(m.loss, wrt=2)(0.3, 0.05, x, np.ones(n))
print("variants ran")
"""


def test_gradients_through_loops_leave_the_heap_intact():
    done = memcheck.run_heap_checked(VARIANTS)
    assert done.returncode == 0 and "variants ran" in done.stdout, done.stderr[-3000:]


def test_the_oscillator_gradient_stays_in_bounds_in_the_checked_build():
    # the checked build gives each region's temporaries the part its parent sized: without the fix
    # it raised BoundsError at the reversed body's store past that part
    m = adc.compile(OSCILLATOR.format(checkpoint="", first="-", second="-"), check_bounds=True)
    x = adc.Variable(np.random.default_rng(0).standard_normal(40))
    with adc.GradientTape() as tape:
        y = m.f(0.3, 0.05, x)
    grad = np.asarray(tape.gradient(y, x, output_gradients=np.ones(40)))
    assert grad.shape == (40,) and np.isfinite(grad).all()


@pytest.mark.skipif(memcheck.valgrind() is None, reason="valgrind is not installed")
def test_the_oscillator_gradient_is_clean_under_valgrind(tmp_path, valgrind_cache):
    memcheck.assert_clean_under_valgrind(
        "import numpy as np, adc\n"
        f"m = adc.compile({OSCILLATOR.format(checkpoint='', first='-', second='-')!r})\n"
        "x = adc.Variable(np.random.default_rng(0).standard_normal(40))\n"
        "with adc.GradientTape() as t:\n"
        "    y = m.f(0.3, 0.05, x)\n"
        "t.gradient(y, x, output_gradients=np.ones(40))\n", tmp_path, valgrind_cache)


def _oscillator(q0, dt, force, first, second):
    q = p = q0
    traj = []
    for f in force:
        p = p + dt * (f + first * q + second * p)
        q = q + dt * p
        traj.append(q)
    return np.array(traj)


@pytest.mark.parametrize("first, second", [("+", "+"), ("+", "-"), ("-", "+"), ("-", "-")])
@pytest.mark.parametrize("checkpoint", ["", ", checkpoint=1", ", checkpoint=3"])
def test_the_oscillator_gradient_matches_finite_differences(first, second, checkpoint):
    m = adc.compile(OSCILLATOR.format(checkpoint=checkpoint, first=first, second=second))
    rng = np.random.default_rng(1)
    force, ct, direction = rng.standard_normal(40), rng.standard_normal(40), rng.standard_normal(40)
    x = adc.Variable(force)
    with adc.GradientTape() as tape:
        y = m.f(0.3, 0.05, x)
    grad = np.asarray(tape.gradient(y, x, output_gradients=ct))
    signs = (1.0 if first == "+" else -1.0, 1.0 if second == "+" else -1.0)
    h = 1e-6
    difference = (_oscillator(0.3, 0.05, force + h * direction, *signs)
                  - _oscillator(0.3, 0.05, force - h * direction, *signs)) @ ct / (2 * h)
    assert np.isclose(grad @ direction, difference, rtol=1e-7, atol=1e-10)
