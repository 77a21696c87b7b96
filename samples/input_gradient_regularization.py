"""Guide, "Input gradient regularization": the gradient, w.r.t. the model, of the magnitude of the
gradient of the output w.r.t. the input (nested tapes), through a compiled dense layer.

Prints the gradients' shapes, [(5, 10), (10,)], for a relu layer (as the guide) and a softplus
layer (smooth, so the second-order terms do not vanish).
"""
from pathlib import Path

import numpy as np

import adc

layers = adc.compile_file(Path(__file__).with_name("layers.adc"))
rng = np.random.default_rng(0)
x = adc.constant(rng.standard_normal((7, 5)).astype(np.float32))
kernel = adc.Variable(rng.standard_normal((5, 10)).astype(np.float32) * 0.5, name="kernel")
bias = adc.Variable(np.zeros(10, np.float32), name="bias")


def input_gradient_magnitude_grads(layer):
    with adc.GradientTape() as t2:
        # The inner tape only takes the gradient with respect to the input, not the variables.
        with adc.GradientTape(watch_accessed_variables=False) as t1:
            t1.watch(x)
            y = layer(x, kernel, bias)
            out = adc.reduce_sum(layer(x, kernel, bias) ** 2)
        g1 = t1.gradient(out, x)    # 1. input gradient
        g1_mag = adc.norm(g1)       # 2. its magnitude
    return t2.gradient(g1_mag, [kernel, bias])   # 3. w.r.t. the model


for name in ("dense_relu", "dense_softplus"):
    dg1_mag = input_gradient_magnitude_grads(getattr(layers, name))
    print(name, [var.shape for var in dg1_mag])
