"""Every Jacobian route bounds its memory: forward mode w.r.t. a scalar holds O(N), and the routes
that push or pull many seeds do so in blocks within the memory budget (memory_limit_mb,
ADC_JACOBIAN_MEMORY_MB). Peaks are the growth of the process's resident set (VmHWM after the
call less VmRSS before it, /proc/self/clear_refs resetting the mark) in a fresh process, which sees
native allocations too. Oracles: NumPy formulas and central differences in float64."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import adc

MiB = 1 << 20

PEAK = """
import sys, numpy as np, adc
route, mode, n, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
options = {} if limit == "default" else {"memory_limit_mb": float(limit)}
m = adc.compile("def f(x: f32[N], d: f32) -> f32[N]:\\n    return sigmoid(x + d)\\n"
                "def g(x: f32[N], d: f32) -> f32:\\n    return sum(sigmoid(x * d))\\n"
                "def b(x: f32[B, K], d: f32) -> f32[B, K]:\\n    return sigmoid(x + d)\\n"
                "def c(x: f32[N], d: f32) -> f32[N]:\\n    return cumsum(x * d)\\n"
                "def s(x: f32[N], d: f32) -> f32:\\n    return sum(cumsum(x * d) * x)\\n"
                "def r(x: f32[B, K]) -> f32[B, 1]:\\n    return sum(cumsum(x * x, axis=1), axis=1, keepdims=True)\\n")

def prepared(n):
    x = adc.Variable(np.linspace(-3, 3, n, dtype=np.float32))
    xb = adc.Variable(np.linspace(-3, 3, n, dtype=np.float32).reshape(n, 1))
    d = adc.Variable(np.float32(0.3))
    with adc.GradientTape(persistent=True) as t:
        if route == "tape scalar source":
            y = adc.sigmoid(x + d)
        elif route == "tape scalar target":
            y = adc.reduce_sum(adc.sigmoid(x * d))
        elif route == "tape batch":
            y = adc.sigmoid(xb + d)
        elif route == "tape batch kernel":
            y = m.b(xb, d)
    xs, ds = x.numpy(), np.float32(0.3)
    return {"tape scalar source": lambda: t.jacobian(y, d, mode=mode, **options),
            "tape scalar target": lambda: t.jacobian(y, x, mode=mode, **options),
            "tape batch": lambda: t.batch_jacobian(y, xb, mode=mode, **options),
            "tape batch kernel": lambda: t.batch_jacobian(y, xb, mode=mode, **options),
            "adc.jacobian": lambda: adc.jacobian(m.f, wrt="d", mode=mode)(xs, ds),
            "adc.jacobian scalar target": lambda: adc.jacobian(m.g, wrt="x", mode=mode)(xs, ds),
            "adc.batch_jacobian": lambda: adc.batch_jacobian(m.b, wrt="x", mode=mode)(xs.reshape(n, 1), ds),
            "adc.hessian": lambda: adc.hessian(m.g, wrt="d", mode=mode)(xs, ds),
            "adc.jacobian cumsum": lambda: adc.jacobian(m.c, wrt="d", mode=mode)(xs, ds),
            "adc.jacobian cumsum loss": lambda: adc.jacobian(m.s, wrt="x", mode=mode)(xs, ds),
            "adc.batch_jacobian cumsum": lambda: adc.batch_jacobian(m.r, wrt="x", mode=mode)(xs.reshape(2, -1))}[route]

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))

prepared(10)()                  # compiles every kernel the route calls
call = prepared(n)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")                # the high-water mark starts again from here
before = status("VmRSS")
result = np.asarray(call())
print(status("VmHWM") - before, result.nbytes)
"""


def peak(route: str, mode: str, n: int, limit="default", environ=None) -> tuple[int, int]:
    """(the resident set's growth over the Jacobian's call, the result's bytes), in a fresh process."""
    done = subprocess.run([sys.executable, "-c", PEAK, route, mode, str(n), str(limit)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(environ or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    grown, result = map(int, done.stdout.split())
    return grown, result


N = 3_000_000       # 11.4 MiB of f32: a seed per element of both sides would be 32.7 TiB

# Each route in each mode that needs only O(N) seeds' worth of work: forward and auto w.r.t. a scalar
# source, reverse and auto to a scalar target; batch Jacobians of 1 x 1 examples both ways.
CHEAP = [("tape scalar source", "forward"), ("tape scalar source", "auto"),
         ("tape scalar target", "reverse"), ("tape scalar target", "auto"),
         *((route, mode) for route in ("tape batch", "tape batch kernel", "adc.jacobian", "adc.batch_jacobian",
                                       "adc.hessian") for mode in ("forward", "reverse", "auto")),
         ("adc.jacobian scalar target", "forward"), ("adc.jacobian scalar target", "reverse"),
         ("adc.jacobian scalar target", "auto")]


@pytest.mark.parametrize("route, mode", CHEAP, ids=[f"{r}-{m}" for r, m in CHEAP])
def test_a_scalar_source_or_target_jacobian_at_three_million_elements_needs_about_its_result(route, mode):
    grown, _ = peak(route, mode, N)
    # the result, the function's own N-element values the route reads, and a few copies: O(N)
    assert grown <= 5 * N * 4 + 16 * MiB, f"{route} ({mode}) grew the process by {grown / MiB:.1f} MiB"


# The expensive direction (a seed per element, each carrying N elements: 576 MB a block unchunked)
# stays within the budget asked for, by the argument or by the environment.
EXPENSIVE = [("tape scalar source", "reverse"), ("tape scalar target", "forward")]


@pytest.mark.parametrize("route, mode", EXPENSIVE, ids=[f"{r}-{m}" for r, m in EXPENSIVE])
@pytest.mark.parametrize("by", ["argument", "environment"])
def test_many_seeds_are_pushed_or_pulled_in_blocks_within_the_memory_budget(route, mode, by):
    n, budget_mb = 12_000, 2
    if by == "argument":
        grown, result = peak(route, mode, n, budget_mb)
    else:
        grown, result = peak(route, mode, n, environ={"ADC_JACOBIAN_MEMORY_MB": str(budget_mb)})
    assert result == n * 4
    assert grown <= 4 * budget_mb * MiB + 16 * MiB, f"{route} ({mode}) grew the process by {grown / MiB:.1f} MiB"


# Chunked results equal unchunked ones and the oracles: a budget of 1 KiB makes every block one seed.
TINY = 1 / 1024


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
def test_blocks_of_seeds_give_the_unchunked_jacobian(mode):
    rng = np.random.default_rng(0)
    x64, w64, d64 = rng.standard_normal(7), rng.standard_normal((7, 5)), 0.4
    x, w, d = adc.Variable(x64), adc.Variable(w64), adc.Variable(np.float64(d64))
    with adc.GradientTape(persistent=True) as tape:
        y = adc.tanh(adc.matmul(adc.reshape(x, (1, 7)), w) * d)         # [1, 5]
    chunked = tape.jacobian(y, {"x": x, "w": w, "d": d}, mode=mode, memory_limit_mb=TINY)
    whole = tape.jacobian(y, {"x": x, "w": w, "d": d}, mode=mode)
    z = x64 @ w64 * d64
    dz = 1 - np.tanh(z) ** 2                                            # d tanh at z, per output
    expected = {"x": (dz[:, None] * w64.T * d64)[None],                 # [1, 5, 7]
                "w": (np.einsum("o,i,op->oip", dz, x64, np.eye(5)) * d64)[None],   # [1, 5, 7, 5]
                "d": (dz * (x64 @ w64))[None]}                          # [1, 5]
    for key in expected:
        np.testing.assert_allclose(chunked[key].numpy(), whole[key].numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(chunked[key].numpy(), expected[key], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("through", ["eager ops", "one kernel call"])
def test_blocks_of_per_example_seeds_give_the_unchunked_batch_jacobian(mode, through):
    rng = np.random.default_rng(1)
    x64, w64 = rng.standard_normal((4, 3)), rng.standard_normal((3, 6))
    x, w = adc.Variable(x64), adc.Variable(w64)
    m = adc.compile("def layer(x: f64[B, I], w: f64[I, O]) -> f64[B, O]:\n    return sigmoid(x @ w)\n")
    with adc.GradientTape(persistent=True) as tape:
        y = adc.sigmoid(adc.matmul(x, w)) if through == "eager ops" else m.layer(x, w)
    chunked = tape.batch_jacobian(y, x, mode=mode, memory_limit_mb=TINY)
    whole = tape.batch_jacobian(y, x, mode=mode)
    s = sigmoid(x64 @ w64)
    expected = np.einsum("bo,io->boi", s * (1 - s), w64)                # [B, O, I]
    np.testing.assert_allclose(chunked.numpy(), whole.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(chunked.numpy(), expected, rtol=1e-10, atol=1e-12)


def test_a_chunked_jacobian_of_a_gradient_is_the_hessian_and_records_on_an_outer_tape():
    rng = np.random.default_rng(2)
    w64 = rng.standard_normal(6)
    w = adc.Variable(w64)

    def loss64(v):
        return np.sum(np.sin(v) * v ** 2)

    with adc.GradientTape() as outer:
        with adc.GradientTape() as t2:
            with adc.GradientTape() as t1:
                loss = adc.reduce_sum(adc.sin(w) * w ** 2)
            g = t1.gradient(loss, w)
        h = t2.jacobian(g, w, memory_limit_mb=TINY)
        trace = adc.reduce_sum(adc.reshape(h, (36,))[::7])
    eps = 1e-4
    fd = np.empty((6, 6))
    for i in range(6):
        for j in range(6):
            def at(a, b):
                v = w64.copy()
                v[i] += a
                v[j] += b
                return loss64(v)
            fd[i, j] = (at(eps, eps) - at(eps, -eps) - at(-eps, eps) + at(-eps, -eps)) / (4 * eps * eps)
    np.testing.assert_allclose(h.numpy(), fd, rtol=1e-6, atol=1e-6)
    # d trace(H) / d w_i = d^3 loss / d w_i^3 = d^3 (sin(w) w^2) / dw^3
    s, c = np.sin(w64), np.cos(w64)
    third = -c * w64 ** 2 - 6 * w64 * s + 6 * c
    np.testing.assert_allclose(outer.gradient(trace, w).numpy(), third, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("limit, error", [(0, ValueError), (-1.0, ValueError), (float("nan"), ValueError),
                                          (float("inf"), ValueError), ("64", TypeError), (True, TypeError)])
def test_a_bad_memory_limit_names_the_parameter(limit, error):
    x = adc.Variable(np.ones(3))
    with adc.GradientTape(persistent=True) as tape:
        y = adc.sin(x)
    with pytest.raises(error, match="memory_limit_mb"):
        tape.jacobian(y, x, memory_limit_mb=limit)
    with pytest.raises(error, match="memory_limit_mb"):
        tape.batch_jacobian(adc.reshape(y, (3, 1)), adc.reshape(x, (3, 1)), memory_limit_mb=limit)


@pytest.mark.parametrize("setting", ["lots", "0", "-5", "nan"])
def test_a_bad_memory_setting_in_the_environment_is_named(setting, monkeypatch):
    monkeypatch.setenv("ADC_JACOBIAN_MEMORY_MB", setting)
    x = adc.Variable(np.ones(3))
    with adc.GradientTape() as tape:
        y = adc.sin(x)
    with pytest.raises(ValueError, match="ADC_JACOBIAN_MEMORY_MB"):
        tape.jacobian(y, x)


# Compiled Jacobians whose seeds make a value larger than the result (a cumsum of N seeds' tangents
# or cotangents: N x N elements, 550 MiB at N = 12,000, for a result of N) go in blocks within
# JACOBIAN_BYTES (256 MiB; adc/passes/jacobian.py).
COMPILED = [("adc.jacobian cumsum", "reverse"), ("adc.jacobian cumsum loss", "forward"),
            ("adc.batch_jacobian cumsum", "forward")]


@pytest.mark.parametrize("route, mode", COMPILED, ids=[f"{r}-{m}" for r, m in COMPILED])
def test_compiled_jacobians_take_their_seeds_in_blocks_within_the_budget(route, mode):
    grown, result = peak(route, mode, 12_000)
    assert result == 12_000 * 4
    assert grown <= 256 * MiB + 16 * MiB, f"{route} ({mode}) grew the process by {grown / MiB:.1f} MiB"
