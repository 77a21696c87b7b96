"""A linear classifier trained with softmax cross-entropy on integer labels (samples/nn.adc).

Five classes of points around random centres in 20 dimensions; twenty steps of gradient descent on
`classifier_loss`, the gradient from a GradientTape (softmax minus one-hot, through a gather).
Prints the loss and the top-1 accuracy every five steps.
"""
from pathlib import Path

import numpy as np

import adc

nn = adc.compile_file(Path(__file__).with_name("nn.adc"))
rng = np.random.default_rng(0)
classes, features, examples = 5, 20, 600
centres = rng.standard_normal((classes, features)).astype(np.float32) * 0.4
labels = rng.integers(0, classes, examples)
x = centres[labels] + rng.standard_normal((examples, features)).astype(np.float32)

w = adc.Variable(np.zeros((features, classes), np.float32), name="w")
b = adc.Variable(np.zeros(classes, np.float32), name="b")
for step in range(21):
    with adc.GradientTape() as tape:
        loss = nn.classifier_loss(x, w, b, labels)
    if step % 5 == 0:
        accuracy = nn.accuracy(x @ w + b, labels)
        print(f"step {step:2d}  loss {float(loss):.6f}  accuracy {float(accuracy):.4f}")
    dw, db = tape.gradient(loss, [w, b])
    w.assign_sub(0.1 * dw)
    b.assign_sub(0.1 * db)
