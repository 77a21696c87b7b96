"""samples/loops.adc and the scripts that use it (pendulum.py, rnn.py, newton.py) against NumPy
written out by hand in float64."""
import re
import subprocess
import sys

import numpy as np

from tests.support.repository import SAMPLES


def run(script: str) -> str:
    result = subprocess.run([sys.executable, str(SAMPLES / script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def floats(text: str) -> np.ndarray:
    return np.array([float(v) for v in re.findall(r"-?\d+\.\d+(?:e[-+]\d+)?", text)])


def rk4(theta, omega, damping, gravity, h, steps):
    def rates(t, w):
        return w, -damping * w - gravity * np.sin(t)
    for _ in range(steps):
        k1 = rates(theta, omega)
        k2 = rates(theta + 0.5 * h * k1[0], omega + 0.5 * h * k1[1])
        k3 = rates(theta + 0.5 * h * k2[0], omega + 0.5 * h * k2[1])
        k4 = rates(theta + h * k3[0], omega + h * k3[1])
        theta = theta + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        omega = omega + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    return theta, omega


def test_the_pendulum_gradients_match_numpy_differences():
    out = run("pendulum.py")
    lines = out.splitlines()
    theta, omega = rk4(np.array([1.0, 0.3]), np.array([0.0, 1.0]), 0.1, 9.81, 0.01, 1000)
    np.testing.assert_allclose(floats(lines[0].split(":", 1)[1]), np.concatenate([theta, omega]), rtol=1e-6)
    point, step = [np.array([1.0, 0.3]), np.array([0.0, 1.0]), 0.1, 9.81], 1e-6
    for k, line in enumerate(lines[1:5]):
        got = floats(line.split("=", 1)[1])
        for index in range(got.size):
            plus = [np.array(v, float) for v in point]
            minus = [np.array(v, float) for v in point]
            plus[k] = plus[k] + step * np.eye(got.size)[index] if got.size > 1 else plus[k] + step
            minus[k] = minus[k] - step * np.eye(got.size)[index] if got.size > 1 else minus[k] - step
            expected = (rk4(*plus, 0.01, 1000)[0].sum() - rk4(*minus, 0.01, 1000)[0].sum()) / (2 * step)
            np.testing.assert_allclose(got[index], expected, rtol=1e-6, atol=1e-8)
    assert float(lines[5].split(":")[1]) < 1e-7
    jacobian = np.array(" ".join(lines[7:]).replace("[", " ").replace("]", " ").split(), float)
    np.testing.assert_allclose(jacobian, [floats(lines[1])[0], 0.0, 0.0, floats(lines[1])[1]], rtol=1e-12)


def test_the_rnn_trains_as_numpy_backpropagation_through_time_does():
    out = run("rnn.py")
    rng = np.random.default_rng(0)
    t, batch, inputs, hidden, outputs = 50, 64, 4, 32, 2
    xs = rng.standard_normal((t, batch, inputs)).astype(np.float32).astype(np.float64)
    targets = (xs.astype(np.float32).mean(0) @ rng.standard_normal((inputs, outputs))).astype(np.float32).astype(float)
    wx = (rng.standard_normal((inputs, hidden)) / np.sqrt(inputs)).astype(np.float32).astype(float)
    wh = (rng.standard_normal((hidden, hidden)) * 0.5 / np.sqrt(hidden)).astype(np.float32).astype(float)
    b = np.zeros(hidden)
    wo = (rng.standard_normal((hidden, outputs)) / np.sqrt(hidden)).astype(np.float32).astype(float)
    losses = []
    for _ in range(8):
        states = [np.zeros((batch, hidden))]
        for x in xs:
            states.append(np.tanh(x @ wx + states[-1] @ wh + b))
        error = states[-1] @ wo - targets
        losses.append(np.mean(error ** 2))
        d_out = 2 * error / error.size
        d_wo, d_h = states[-1].T @ d_out, d_out @ wo.T
        d_wx, d_wh, d_b = np.zeros_like(wx), np.zeros_like(wh), np.zeros_like(b)
        for step in range(t, 0, -1):
            d_pre = d_h * (1 - states[step] ** 2)
            d_wx += xs[step - 1].T @ d_pre
            d_wh += states[step - 1].T @ d_pre
            d_b += d_pre.sum(0)
            d_h = d_pre @ wh.T
        wx, wh, b, wo = wx - 0.5 * d_wx, wh - 0.5 * d_wh, b - 0.5 * d_b, wo - 0.5 * d_wo
    got = [float(v) for v in re.findall(r"loss (\S+)", out)]
    np.testing.assert_allclose(got, losses, rtol=2e-4)
    assert got[-1] < 0.5 * got[0]


def test_newton_through_a_while_loop_gives_the_implicit_derivative():
    out = run("newton.py")
    assert float(re.search(r"from 1 / \(3 x\^2 \+ 1\): (\S+)", out).group(1)) < 1e-12
    assert "diagonal: True, its diagonal is dx/dc: True" in out
