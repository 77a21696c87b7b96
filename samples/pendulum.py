"""An RK4 integrator of damped pendulums (samples/loops.adc's `pendulum`), differentiated through
its 1,000 steps: the gradient of the final angles w.r.t. the initial state and the parameters,
and their Jacobian w.r.t. the initial angles, by a tape, checked against central differences."""
from pathlib import Path

import numpy as np

import adc

loops = adc.compile_file(Path(__file__).with_name("loops.adc"))
theta0, omega0 = adc.Variable(np.array([1.0, 0.3])), adc.Variable(np.array([0.0, 1.0]))
damping, gravity = adc.Variable(0.1, dtype="f64"), adc.Variable(9.81, dtype="f64")
h, steps = 0.01, 1000

with adc.GradientTape(persistent=True) as tape:
    theta, omega = loops.pendulum(theta0, omega0, damping, gravity, h, steps)
    final_angle = adc.reduce_sum(theta)
print(f"after {steps} steps of {h}: theta = {theta.numpy()}, omega = {omega.numpy()}")
gradients = tape.gradient(final_angle, [theta0, omega0, damping, gravity])
names = ["theta0", "omega0", "damping", "gravity"]
for name, g in zip(names, gradients):
    print(f"d sum(theta) / d {name:8s} = {np.atleast_1d(g.numpy())}")


def final_sum(values):
    t, _ = loops.pendulum(*values, h, steps)
    return float(np.sum(t.numpy()))


point = [theta0.numpy(), omega0.numpy(), float(damping.numpy()), float(gravity.numpy())]
step = 1e-6
worst = 0.0
for k, g in enumerate(gradients):
    for index in np.ndindex(np.shape(point[k])):
        moved = [[np.array(v, dtype=float) for v in point] for _ in range(2)]
        moved[0][k][index] += step
        moved[1][k][index] -= step
        difference = (final_sum(moved[0]) - final_sum(moved[1])) / (2 * step)
        worst = max(worst, abs(difference - np.atleast_1d(g.numpy())[index if index else 0]))
print(f"largest difference from central differences: {worst:.2e}")
print(f"d theta / d theta0 (tape.jacobian):\n{tape.jacobian(theta, theta0).numpy()}")
