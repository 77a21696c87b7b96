"""batch_jacobian through gathers, scans, loops, branches and scatters that keep the examples apart,
and the kernels that truly mix them still refused.

Each accepted kernel: the full Jacobian by central finite differences of the kernel itself (float64)
is zero off the diagonal blocks, and `adc.batch_jacobian` and `tape.batch_jacobian` give its diagonal
blocks. Each refused kernel: its finite-difference Jacobian is not block-diagonal, and both routes
refuse it naming the examples mixing.
"""
import numpy as np
import pytest

import adc

SOURCE = """
def take_columns(x: f64[B, N], idx: i64[K]) -> f64[B, K]:
    return take(x, idx, axis=1)

def softmax_of_taken_cumsum(x: f64[B, N], idx: i64[K]) -> f64[B, K]:
    return softmax(take(cumsum(x, axis=1), idx, axis=1), axis=1)

def along(x: f64[B, N], idx: i64[B, K]) -> f64[B, K]:
    return sin(take_along_axis(x, idx, 1))

def tanh_three_times(x: f64[B, N], idx: i64[K]) -> f64[B, N]:
    y = x
    for i in range(3):
        y = tanh(y)
    return y

def recurrent(x: f64[B, N], idx: i64[K]) -> f64[B, N]:
    h = tanh(x)
    for t in range(N):
        h = tanh(reshape(x[:, t], [B, 1]) * h + reshape(h[:, idx[t % K]], [B, 1]))
    return h

def halve_while_any_is_large(x: f64[B, N], idx: i64[K]) -> f64[B, N]:
    y = x
    while max(abs(y)) > 0.25:
        y = y * 0.5
    return y

def branch_on_the_batch_mean(x: f64[B, N], idx: i64[K]) -> f64[B, N]:
    if mean(x) > 0.0:
        y = tanh(x)
    else:
        y = sin(x) * x
    return y

def scatter_at_a_computed_column(x: f64[B, N], idx: i64[K]) -> f64[B, N]:
    y = x * 1.0
    y[:, argmax(sum(x, axis=0))] = tanh(x[:, 0])
    for i in range(N):
        y[:, i] = sin(y[:, i]) + y[:, idx[i % K]]
    return y

def loop_over_examples(x: f64[B, N], idx: i64[K]) -> f64[B, N]:
    y = x * 1.0
    for b in range(B):
        y[b] = tanh(x[b]) * sum(x[b])
    return y

def running_sum_over_examples(x: f64[B, N], idx: i64[K]) -> f64[B, N]:
    y = x * 1.0
    total = zeros([N], dtype=f64)
    for b in range(B):
        total = total + x[b]
        y[b] = tanh(total)
    return y

def batch_normalization(x: f64[B, N], idx: i64[K]) -> f64[B, N]:
    return x - mean(x, axis=0)

def across_examples(x: f64[B, N], idx: i64[K]) -> f64[B, N]:
    return (x @ transpose(x)) @ x

def loop_carrying_a_batch_mean(x: f64[B, N], idx: i64[K]) -> f64[B, N]:
    y = x
    for i in range(2):
        y = tanh(y + mean(y, axis=0))
    return y

def rows_taken_along_the_batch(x: f64[B, N], idx: i64[B, N]) -> f64[B, N]:
    return take_along_axis(x, idx, 0)
"""

B, N, K = 3, 4, 5
KEEPING = ["take_columns", "softmax_of_taken_cumsum", "along", "tanh_three_times", "recurrent",
           "halve_while_any_is_large", "branch_on_the_batch_mean", "scatter_at_a_computed_column",
           "loop_over_examples"]
MIXING = ["running_sum_over_examples", "batch_normalization", "across_examples", "loop_carrying_a_batch_mean",
          "rows_taken_along_the_batch"]
STEP = 1e-6


@pytest.fixture(scope="module")
def kernels():
    return adc.compile(SOURCE, "per_example.adc")


def arguments(name: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.5, 1.5, (B, N))
    if name == "along":
        idx = rng.integers(-N, N, (B, K))
    elif name == "rows_taken_along_the_batch":
        idx = (np.arange(B)[:, None] + np.ones((B, N), int)) % B       # example b reads example b + 1
    else:
        idx = rng.integers(0, N, K)
    return x, idx.astype(np.int64)


def full_jacobian(kernel, x, idx) -> np.ndarray:
    """d y[b, i] / d x[c, j] by central differences of the kernel: [B, *y.shape[1:], B, N]."""
    columns = []
    for c, j in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[c, j] = STEP
        columns.append((kernel(x + step, idx).numpy() - kernel(x - step, idx).numpy()) / (2 * STEP))
    return np.moveaxis(np.array(columns), 0, -1).reshape(columns[0].shape + x.shape)


def off_diagonal(jacobian: np.ndarray) -> np.ndarray:
    return np.array([jacobian[b, ..., c, :] for b in range(B) for c in range(B) if b != c])


@pytest.mark.parametrize("name", KEEPING)
def test_a_kernel_keeping_examples_apart_has_the_diagonal_blocks_as_batch_jacobian(kernels, name):
    kernel = getattr(kernels, name)
    for seed in (0, 1):
        x, idx = arguments(name, seed)
        full = full_jacobian(kernel, x, idx)
        assert np.abs(off_diagonal(full)).max() == 0.0          # the oracle: nothing crosses examples
        blocks = np.stack([full[b, ..., b, :] for b in range(B)])
        compiled = adc.batch_jacobian(kernel)(x, idx).numpy()
        np.testing.assert_allclose(compiled, blocks, rtol=1e-6, atol=1e-8)
        source = adc.Variable(x)
        with adc.GradientTape() as tape:
            y = kernel(source, idx)
        np.testing.assert_allclose(tape.batch_jacobian(y, source).numpy(), blocks, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", MIXING)
def test_a_kernel_mixing_examples_is_still_refused(kernels, name):
    kernel = getattr(kernels, name)
    x, idx = arguments(name)
    assert np.abs(off_diagonal(full_jacobian(kernel, x, idx))).max() > 1e-3     # it truly mixes
    with pytest.raises(adc.CompileError, match="examples mix"):
        adc.batch_jacobian(kernel)(x, idx)
    source = adc.Variable(x)
    with adc.GradientTape() as tape:
        y = kernel(source, idx)
    with pytest.raises(ValueError, match=f"examples mix in {name}"):
        tape.batch_jacobian(y, source)
