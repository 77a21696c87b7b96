"""An Elman RNN (samples/loops.adc's `rnn_loss`) trained for a few steps by backpropagation
through time: sequences of T = 50 steps whose target is a linear map of their running mean.
Prints the loss at each SGD step (it falls) and the gradient norm of each weight."""
from pathlib import Path

import numpy as np

import adc

loops = adc.compile_file(Path(__file__).with_name("loops.adc"))
rng = np.random.default_rng(0)
t, batch, inputs, hidden, outputs = 50, 64, 4, 32, 2
xs = rng.standard_normal((t, batch, inputs)).astype(np.float32)
targets = (xs.mean(0) @ rng.standard_normal((inputs, outputs))).astype(np.float32)
weights = [adc.Variable((rng.standard_normal((inputs, hidden)) / np.sqrt(inputs)).astype(np.float32), name="wx"),
           adc.Variable((rng.standard_normal((hidden, hidden)) * 0.5 / np.sqrt(hidden)).astype(np.float32), name="wh"),
           adc.Variable(np.zeros(hidden, np.float32), name="b"),
           adc.Variable((rng.standard_normal((hidden, outputs)) / np.sqrt(hidden)).astype(np.float32), name="wo")]
step = adc.value_and_grad(loops.rnn_loss, wrt=("wx", "wh", "b", "wo"))
for k in range(8):
    loss, *grads = step(xs, targets, *weights)
    if k == 0:
        print("gradient norms: " + ", ".join(f"{w.name} {np.linalg.norm(g.numpy()):.4f}"
                                             for w, g in zip(weights, grads)))
    print(f"step {k}  loss {float(loss):.6f}")
    for w, g in zip(weights, grads):
        w.assign_sub(0.5 * g)
