"""An embedding table trained for a few SGD steps (samples/nn.adc's `embedding_loss`).

Sentences of tokens drawn from a Zipf law, so the same rows are looked up many times: the
gradient w.r.t. the table is a scatter-add, each repeated token's rows accumulating. Prints how
often the most common token occurs, that its gradient row is the sum over its occurrences, and
the loss at each of five steps.
"""
from pathlib import Path

import numpy as np

import adc

nn = adc.compile_file(Path(__file__).with_name("nn.adc"))
rng = np.random.default_rng(0)
vocabulary, width, n = 1000, 16, 4096
tokens = rng.zipf(1.5, n) % vocabulary
targets = rng.standard_normal((n, width)).astype(np.float32)
table = adc.Variable(rng.standard_normal((vocabulary, width)).astype(np.float32) * 0.1, name="table")

common = np.bincount(tokens).argmax()
gradient = adc.grad(nn.embedding_loss, wrt="table")(table, tokens, targets).numpy()
per_occurrence = 2 * (table.numpy()[tokens] - targets) / (n * width)
print(f"token {common} occurs {np.sum(tokens == common)} times; its gradient row is the sum over "
      f"them: {np.allclose(gradient[common], per_occurrence[tokens == common].sum(0), rtol=1e-4, atol=1e-9)}")
for step in range(5):
    with adc.GradientTape() as tape:
        loss = nn.embedding_loss(table, tokens, targets)
    print(f"step {step}  loss {float(loss):.6f}")
    table.assign_sub(10.0 * tape.gradient(loss, table))
