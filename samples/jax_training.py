"""A JAX training loop with optax whose loss is adc's softmax cross-entropy (samples/nn.adc).

    python samples/jax_training.py [steps]          # needs jax and optax (pip install 'adc[jax]' optax)

A two-layer classifier of five classes of points around random centres in 20 dimensions, its
parameters a dict of JAX arrays, trained by a jitted step with `optax.adam`. The loss is
`adc.jax.function(nn.cross_entropy)` on the logits JAX computes: under `jit` it is a custom call
of adc's XLA FFI handler, and `jax.grad` reaches adc's VJP kernel through the call's transpose
rule. A second run of the same steps uses optax's own
`softmax_cross_entropy_with_integer_labels`; the sample prints both losses every few steps, checks
they agree to float32 rounding, and times a step of each (median of the steps, taken in turn).
"""
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

import adc
import adc.jax

jax.config.update("jax_enable_x64", True)       # the kernel's labels are i64
nn = adc.compile_file(Path(__file__).with_name("nn.adc"))
cross_entropy = adc.jax.function(nn.cross_entropy)      # (logits: f32[B, C], labels: i64[B]) -> f32


def jax_cross_entropy(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def logits_of(params, x):
    hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
    return hidden @ params["w2"] + params["b2"]


def training_step(loss_fn, optimizer):
    """One jitted step: the loss and its gradient w.r.t. the parameters, then Adam's update."""
    @jax.jit
    def step(params, state, x, labels):
        loss, grads = jax.value_and_grad(lambda p: loss_fn(logits_of(p, x), labels))(params)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss
    return step


def main(steps: int) -> None:
    rng = np.random.default_rng(0)
    classes, features, hidden, examples = 5, 20, 32, 600
    centres = rng.standard_normal((classes, features)).astype(np.float32) * 0.4
    labels = rng.integers(0, classes, examples)
    x = jnp.asarray(centres[labels] + rng.standard_normal((examples, features)).astype(np.float32))
    labels = jnp.asarray(labels)
    scale = np.float32(0.3)
    params = {"w1": rng.standard_normal((features, hidden)).astype(np.float32) * scale,
              "b1": np.zeros(hidden, np.float32),
              "w2": rng.standard_normal((hidden, classes)).astype(np.float32) * scale,
              "b2": np.zeros(classes, np.float32)}
    optimizer = optax.adam(0.01)
    runs = {name: [training_step(loss_fn, optimizer), dict(params), optimizer.init(params), [], []]
            for name, loss_fn in (("adc", cross_entropy), ("jax", jax_cross_entropy))}
    for _ in range(steps):
        for name, run in runs.items():      # in turn, so a loaded machine slows both alike
            step, p, state, losses, times = run
            start = time.perf_counter()
            run[1], run[2], loss = step(p, state, x, labels)
            losses.append(float(loss))      # (waits for the step)
            times.append(time.perf_counter() - start)

    adc_losses, jax_losses = runs["adc"][3], runs["jax"][3]
    for k in range(0, steps, max(1, steps // 10)):
        print(f"step {k:3d}  adc loss {adc_losses[k]:.6f}  jax loss {jax_losses[k]:.6f}")
    worst = max(abs(a - j) for a, j in zip(adc_losses, jax_losses))
    print(f"largest difference of the losses along the way: {worst:.1e}")
    assert worst < 1e-4, "the two trainings drifted apart by more than float32 rounding accumulates"
    logits = logits_of(runs["jax"][1], x)
    exact = float(jax_cross_entropy(logits.astype(jnp.float64), labels))
    errors = [abs(float(loss(logits, labels)) - exact) for loss in (cross_entropy, jax_cross_entropy)]
    scale = float(jnp.abs(logits).max(axis=1).mean()) + np.log(logits.shape[1])
    bound = 4 * np.finfo(np.float32).eps * scale    # a few roundings of each example's terms, at their scale
    print(f"on the same logits, from the float64 loss: adc's {errors[0]:.1e}, optax's {errors[1]:.1e} "
          f"(float32 rounding bound {bound:.1e})")
    assert errors[0] <= bound, "adc's loss is farther from the exact one than float32 rounding allows"
    per_step = {name: statistics.median(run[4][1:] or run[4]) for name, run in runs.items()}
    print(f"time per step (jit): adc loss {per_step['adc'] * 1e6:.0f} us, jax loss {per_step['jax'] * 1e6:.0f} us "
          f"(adc/jax = {per_step['adc'] / per_step['jax']:.2f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
