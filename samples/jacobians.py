"""Guide, "Jacobians": a scalar source (the Jacobian has the target's shape) and a tensor source
(the shapes concatenated; summed over the target's axes it is the gradient).

Prints (201,) (201,), the sigmoid's largest slope 0.25, then (7, 10) (5, 10) (7, 10, 5, 10) and
whether the summed Jacobian equals tape.gradient. Saves jacobian_sigmoid.png (y and dy/dx).
"""
from pathlib import Path

import numpy as np

import adc
from figures import save

# Scalar source
x = adc.constant(np.linspace(-10.0, 10.0, 200 + 1).astype(np.float32))
delta = adc.Variable(0.0)
with adc.GradientTape() as tape:
    y = adc.nn.sigmoid(x + delta)
dy_dx = tape.jacobian(y, delta)
print(y.shape, dy_dx.shape)
print("max dy/dx:", float(adc.reduce_max(dy_dx)))


def draw_sigmoid(plt):
    plt.plot(x.numpy(), y.numpy(), label="y")
    plt.plot(x.numpy(), dy_dx.numpy(), label="dy/dx")
    plt.legend()
    plt.xlabel("x")


save("jacobian_sigmoid.png", draw_sigmoid)

# Tensor source: a dense relu layer
layers = adc.compile_file(Path(__file__).with_name("layers.adc"))
rng = np.random.default_rng(0)
x = adc.constant(rng.standard_normal((7, 5)).astype(np.float32))
kernel = adc.Variable(rng.standard_normal((5, 10)).astype(np.float32) * 0.5, name="kernel")
bias = adc.Variable(np.zeros(10, np.float32), name="bias")
with adc.GradientTape(persistent=True) as tape:
    y = layers.dense_relu(x, kernel, bias)
j = tape.jacobian(y, kernel)
print(y.shape, kernel.shape, j.shape)
g = tape.gradient(y, kernel)
j_sum = adc.reduce_sum(j, axis=[0, 1])
print("gradient == jacobian summed over the target:", float(adc.reduce_max(abs(g - j_sum))) < 1e-3)
