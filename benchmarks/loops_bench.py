"""Loops, differentiated: samples/loops.adc's Elman RNN and RK4 pendulum against JAX (jit of grad
over lax.scan) and PyTorch (autograd over a Python loop), a trajectory written row by row in a
loop against JAX's stacked scan outputs, and the memory a long loop's gradient keeps under
checkpointing.

    python benchmarks/run.py rnn rk4 trajectory loop_memory
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import adc
from timing import fastest, optional, report, timed

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def bench_rnn(m) -> None:
    """Loss and gradient w.r.t. every weight of the RNN, T = 1,000 steps, B = 32, H = 128, f32."""
    t, b, i, h, o = 1000, 32, 32, 128, 8
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((t, b, i)).astype(np.float32)
    targets = rng.standard_normal((b, o)).astype(np.float32)
    weights = [(rng.standard_normal((i, h)) / np.sqrt(i)).astype(np.float32),
               (rng.standard_normal((h, h)) * 0.9 / np.sqrt(h)).astype(np.float32),
               np.zeros(h, np.float32), (rng.standard_normal((h, o)) / np.sqrt(h)).astype(np.float32)]
    both = adc.value_and_grad(m.rnn_loss, wrt=("wx", "wh", "b", "wo"))
    loss, *grads = (r.numpy() for r in both(xs, targets, *weights))
    routes = {"adc.value_and_grad": timed(lambda: both(xs, targets, *weights), min_time=1.0, repeats=5)}
    others = {}
    jax = optional("jax")
    if jax:
        jnp = jax.numpy

        def jax_loss(wx, wh, bias, wo, xs, targets):
            def cell(state, x):
                return jnp.tanh(x @ wx + state @ wh + bias), None
            last, _ = jax.lax.scan(cell, jnp.zeros((b, h), jnp.float32), xs)
            return jnp.mean((last @ wo - targets) ** 2)

        step = jax.jit(jax.value_and_grad(jax_loss, argnums=(0, 1, 2, 3)))
        args = [jnp.asarray(w) for w in weights] + [jnp.asarray(xs), jnp.asarray(targets)]
        jl, jg = step(*args)
        np.testing.assert_allclose(float(jl), loss, rtol=1e-4)
        for g, want in zip(jg, grads):
            np.testing.assert_allclose(np.asarray(g), want, rtol=2e-3, atol=1e-5)
        others.update(fastest("jax", {"jit(value_and_grad(scan))": timed(
            lambda: jax.block_until_ready(step(*args)), min_time=1.0, repeats=5)}))
    torch = optional("torch")
    if torch:
        tw = [torch.from_numpy(w.copy()).requires_grad_() for w in weights]
        txs, tt = torch.from_numpy(xs), torch.from_numpy(targets)

        def torch_both():
            state = torch.zeros(b, h)
            for x in txs:
                state = torch.tanh(x @ tw[0] + state @ tw[1] + tw[2])
            value = torch.mean((state @ tw[3] - tt) ** 2)
            return value, torch.autograd.grad(value, tw)

        tl, tg = torch_both()
        np.testing.assert_allclose(float(tl.detach()), loss, rtol=1e-4)
        others.update(fastest("torch", {"autograd over a loop": timed(torch_both, min_time=1.0, repeats=5)}))
    report(f"Elman RNN loss + gradient, T={t}, B={b}, H={h}, f32", routes, others,
           "<= 1.0x the best peer (peer/adc >= 1)")


def bench_rk4(m) -> None:
    """Gradient of the final angle and velocity w.r.t. the initial state and the parameters after
    10,000 RK4 steps of one damped pendulum, f64."""
    steps, h = 10_000, 1e-3
    theta0, omega0 = np.array([1.0]), np.array([0.0])
    damping, gravity = 0.1, 9.81

    def loss_kernel():
        return adc.compile(
            "def final(theta0: f64[P], omega0: f64[P], damping: f64, gravity: f64, h: f64, steps: i64) -> f64:\n"
            "    theta, omega = pendulum(theta0, omega0, damping, gravity, h, steps)\n"
            "    return sum(theta) + sum(omega)\n" + (SAMPLES / "loops.adc").read_text(), "rk4.adc").final

    gradient = adc.grad(loss_kernel(), wrt=(0, 1, 2, 3))
    args = (theta0, omega0, damping, gravity, h, steps)
    grads = [g.numpy() for g in gradient(*args)]
    routes = {"adc.grad": timed(lambda: gradient(*args), min_time=1.0, repeats=5)}
    others = {}
    jax = optional("jax")
    if jax:
        jax.config.update("jax_enable_x64", True)
        jnp = jax.numpy

        def rates(theta, omega, damping, gravity):
            return omega, -damping * omega - gravity * jnp.sin(theta)

        def final(theta0, omega0, damping, gravity):
            def step(state, _):
                theta, omega = state
                k1t, k1w = rates(theta, omega, damping, gravity)
                k2t, k2w = rates(theta + 0.5 * h * k1t, omega + 0.5 * h * k1w, damping, gravity)
                k3t, k3w = rates(theta + 0.5 * h * k2t, omega + 0.5 * h * k2w, damping, gravity)
                k4t, k4w = rates(theta + h * k3t, omega + h * k3w, damping, gravity)
                return (theta + h / 6 * (k1t + 2 * k2t + 2 * k3t + k4t),
                        omega + h / 6 * (k1w + 2 * k2w + 2 * k3w + k4w)), None
            (theta, omega), _ = jax.lax.scan(step, (theta0, omega0), None, length=steps)
            return jnp.sum(theta) + jnp.sum(omega)

        jgrad = jax.jit(jax.grad(final, argnums=(0, 1, 2, 3)))
        jargs = (jnp.asarray(theta0), jnp.asarray(omega0), jnp.float64(damping), jnp.float64(gravity))
        for g, want in zip(jgrad(*jargs), grads):
            np.testing.assert_allclose(np.asarray(g), want, rtol=1e-9)
        others.update(fastest("jax", {"jit(grad(scan))": timed(lambda: jax.block_until_ready(jgrad(*jargs)),
                                                               min_time=1.0, repeats=5)}))
    torch = optional("torch")
    if torch:
        def torch_grad():
            p = [torch.tensor(v, dtype=torch.float64, requires_grad=True)
                 for v in (theta0, omega0, [damping], [gravity])]
            theta, omega = p[0], p[1]
            for _ in range(steps):
                def r(t, w):
                    return w, -p[2] * w - p[3] * torch.sin(t)
                k1t, k1w = r(theta, omega)
                k2t, k2w = r(theta + 0.5 * h * k1t, omega + 0.5 * h * k1w)
                k3t, k3w = r(theta + 0.5 * h * k2t, omega + 0.5 * h * k2w)
                k4t, k4w = r(theta + h * k3t, omega + h * k3w)
                theta = theta + h / 6 * (k1t + 2 * k2t + 2 * k3t + k4t)
                omega = omega + h / 6 * (k1w + 2 * k2w + 2 * k3w + k4w)
            return torch.autograd.grad(theta.sum() + omega.sum(), p)

        others.update(fastest("torch", {"autograd over a loop": timed(torch_grad, min_time=1.0, repeats=3)}))
    report(f"RK4 damped pendulum, gradient through {steps:,} steps, f64", routes, others,
           "<= 1.0x the best peer (peer/adc >= 1)")


TRAJECTORY = """
def trajectory_loss(x0: f64[P], n: i64, out: f64[T, P]) -> f64:
    x = x0
    y = out
    for t in range(n):
        x = x * 0.999 + 0.001 * sin(x)
        y[t] = x
    return sum(y * y)
"""


def bench_trajectory(_loops) -> None:
    """Gradient w.r.t. the initial state of the squared norm of a trajectory y[t] = x_t written in
    the loop, 100,000 steps of a 2-vector, f64: each step writes one row in place."""
    steps = 100_000
    x0, out = np.array([0.5, -1.0]), np.zeros((steps, 2))
    gradient = adc.grad(adc.compile(TRAJECTORY, "trajectory.adc").trajectory_loss, wrt="x0")
    want = gradient(x0, steps, out).numpy()
    routes = {"adc.grad": timed(lambda: gradient(x0, steps, out), min_time=1.0, repeats=5)}
    others = {}
    jax = optional("jax")
    if jax:
        jax.config.update("jax_enable_x64", True)
        jnp = jax.numpy

        def loss(x0):
            def step(x, _):
                x = x * 0.999 + 0.001 * jnp.sin(x)
                return x, x
            _, ys = jax.lax.scan(step, x0, None, length=steps)
            return jnp.sum(ys * ys)

        jgrad = jax.jit(jax.grad(loss))
        np.testing.assert_allclose(np.asarray(jgrad(jnp.asarray(x0))), want, rtol=1e-9)
        others.update(fastest("jax", {"jit(grad(scan)), ys stacked": timed(
            lambda: jax.block_until_ready(jgrad(jnp.asarray(x0))), min_time=1.0, repeats=5)}))
    report(f"trajectory y[t] = x through {steps:,} steps of a 2-vector, gradient, f64", routes, others,
           "<= 1.0x the best peer (peer/adc >= 1)")


MEMORY_CHILD = """
import json, re, sys
import numpy as np
import adc

def status(field):
    return int(re.search(field + r":\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) / 1024

policy = sys.argv[1]
m = adc.compile(
    "def decay(x: f64[S], n: i64) -> f64:\\n"
    "    for i in range(n" + ("" if policy == "default" else ", checkpoint=1") + "):\\n"
    "        x = x * 0.9999 + 0.0001 * sin(x)\\n"
    "    return sum(x)\\n", "decay.adc")
gradient = adc.grad(m.decay, wrt="x")
x = np.linspace(0.0, 1.0, 1000)
gradient(x, 10)                                   # compiled, the runtime warmed up
open("/proc/self/clear_refs", "w").write("5")     # the peak starts again from here (compiling had its own)
before = status("VmRSS")
g = gradient(x, 100_000).numpy()
peak = status("VmHWM")
print(json.dumps({"peak_mb": peak, "grown_mb": peak - before, "checksum": float(g.sum())}))
"""


def bench_loop_memory() -> None:
    """Peak resident memory of the gradient of a 100,000-step loop over 1,000 f64 (8 KB a state),
    each policy in a fresh process: the default stores O(sqrt(T)) states, checkpoint=1 all T."""
    results = {}
    for policy in ("default", "checkpoint=1"):
        out = subprocess.run([sys.executable, "-c", MEMORY_CHILD, policy], capture_output=True, text=True,
                             timeout=1800, check=True)
        results[policy] = json.loads(out.stdout)
    assert results["default"]["checksum"] == results["checkpoint=1"]["checksum"]
    states = 100_000 * 8000 / 2 ** 20
    print("\ngradient of a 100,000-step loop over 1,000 f64 (all its states: 763 MiB)")
    for policy, r in results.items():
        print(f"  {policy:14s} peak RSS during the gradient {r['peak_mb']:8.1f} MiB, "
              f"{r['grown_mb']:8.1f} MiB over the RSS before it")
    print(f"  default / checkpoint=1 growth: {results['default']['grown_mb'] / results['checkpoint=1']['grown_mb']:.3f}"
          f"   (2 sqrt(T) states: {2 * np.sqrt(100_000) * 8000 / 2 ** 20:.1f} MiB of {states:.0f})")
    print("  target: the default policy within O(sqrt(T)) stored states")


BENCHMARKS = {"rnn": bench_rnn, "rk4": bench_rk4, "trajectory": bench_trajectory}
