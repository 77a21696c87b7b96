"""Scaled dot-product attention softmax(Q Kᵀ/√d) V (samples/nn.adc), its gradient, and a batch
Jacobian through it.

Prints the output's shape, the gradient of sum(y²) w.r.t. Q, K and V (their shapes and norms),
and the batch Jacobian of each example's output w.r.t. its queries: query row t' moves only
softmax row t', so output row t depends on query row t alone and the (t, t') blocks with t != t'
are zero.
"""
from pathlib import Path

import numpy as np

import adc

nn = adc.compile_file(Path(__file__).with_name("nn.adc"))
rng = np.random.default_rng(0)
batch, length, width = 4, 6, 8
q, k, v = (adc.Variable(rng.standard_normal((batch, length, width)).astype(np.float32), name=n) for n in "qkv")

with adc.GradientTape(persistent=True) as tape:
    y = nn.attention(q, k, v)
    loss = adc.reduce_sum(y * y)
print("y", y.shape)
for name, g in zip("qkv", tape.gradient(loss, [q, k, v])):
    print(f"d loss / d {name} {g.shape} norm {float(adc.norm(g)):.5f}")
jacobian = tape.batch_jacobian(y, q)
print("batch_jacobian", jacobian.shape)
blocks = np.abs(jacobian.numpy()).sum(axis=(2, 4))        # (batch, t, t'): how y[t] depends on q[t']
off_diagonal = blocks * (1 - np.eye(length))
print("rows depend only on their own query:", bool(np.all(off_diagonal == 0)))
