"""samples/nn.adc and the scripts that use it (cross_entropy.py, embedding.py, attention.py) against
NumPy written out by hand in float64, and against JAX where it is installed."""
import re
import subprocess
import sys

import numpy as np
import pytest
import scipy.special as sp

import adc
from tests.support.repository import SAMPLES


@pytest.fixture(scope="module")
def nn():
    return adc.compile_file(SAMPLES / "nn.adc")


def run(script: str) -> str:
    result = subprocess.run([sys.executable, str(SAMPLES / script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def numbers(pattern: str, text: str) -> np.ndarray:
    """Each match's groups as a row of floats."""
    return np.array([[float(g) for g in m.groups()] for m in re.finditer(pattern, text)])


def attention_numpy(q, k, v, dy):
    """softmax(q kᵀ/√d) v and its VJP for cotangent dy, in float64."""
    q, k, v, dy = (a.astype(np.float64) for a in (q, k, v, dy))
    d = q.shape[-1]
    p = sp.softmax(q @ k.transpose(0, 2, 1) / np.sqrt(d), axis=-1)
    dp = dy @ v.transpose(0, 2, 1)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / np.sqrt(d)
    return p @ v, ds @ k, ds.transpose(0, 2, 1) @ q, p.transpose(0, 2, 1) @ dy


def test_the_classifier_sample_trains_as_numpy_does():
    out = run("cross_entropy.py")
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((5, 20)).astype(np.float32) * 0.4
    labels = rng.integers(0, 5, 600)
    x = (centres[labels] + rng.standard_normal((600, 20)).astype(np.float32)).astype(np.float64)
    w, b, want = np.zeros((20, 5)), np.zeros(5), []
    for step in range(21):
        logits = x @ w + b
        loss = np.mean(sp.logsumexp(logits, axis=1) - logits[np.arange(600), labels])
        if step % 5 == 0:
            want.append([step, loss, np.mean(logits.argmax(1) == labels)])
        dlogits = (sp.softmax(logits, axis=1) - np.eye(5)[labels]) / 600
        w, b = w - 0.1 * x.T @ dlogits, b - 0.1 * dlogits.sum(0)
    got = numbers(r"step +(\d+)  loss ([\d.]+)  accuracy ([\d.]+)", out)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-3)   # accuracy: one example in 600 at a tie
    assert got[-1, 1] < got[0, 1] / 1.4 and got[-1, 2] > 0.6


def test_the_embedding_sample_trains_as_numpy_does_with_repeated_tokens():
    out = run("embedding.py")
    rng = np.random.default_rng(0)
    tokens = rng.zipf(1.5, 4096) % 1000
    targets = rng.standard_normal((4096, 16)).astype(np.float32).astype(np.float64)
    table = (rng.standard_normal((1000, 16)).astype(np.float32) * 0.1).astype(np.float64)
    assert "its gradient row is the sum over them: True" in out
    want = []
    for step in range(5):
        diff = table[tokens] - targets
        want.append([step, np.mean(diff ** 2)])
        grad = np.zeros_like(table)
        np.add.at(grad, tokens, 2 * diff / diff.size)
        table = table - 10.0 * grad
    np.testing.assert_allclose(numbers(r"step (\d+)  loss ([\d.]+)", out), want, rtol=1e-5)


def test_the_attention_sample_prints_gradients_and_a_block_diagonal_batch_jacobian():
    out = run("attention.py")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((4, 6, 8)).astype(np.float32) for _ in range(3))
    y = attention_numpy(q, k, v, np.zeros_like(q))[0]
    grads = attention_numpy(q, k, v, 2 * y)[1:]
    got = numbers(r"d loss / d [qkv] \(4, 6, 8\) norm ([\d.]+)", out)[:, 0]
    np.testing.assert_allclose(got, [np.linalg.norm(g) for g in grads], rtol=1e-4)
    assert "batch_jacobian (4, 6, 8, 6, 8)" in out and "rows depend only on their own query: True" in out


def test_attention_value_gradient_and_batch_jacobian_against_numpy(nn):
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4))
    v, dy = rng.standard_normal((2, 5, 6)), rng.standard_normal((2, 3, 6))
    q, k, v, dy = (a.astype(np.float32) for a in (q, k, v, dy))
    variables = [adc.Variable(a) for a in (q, k, v)]
    with adc.GradientTape(persistent=True) as tape:
        y = nn.attention(*variables)
    want = attention_numpy(q, k, v, dy)
    np.testing.assert_allclose(y.numpy(), want[0], rtol=1e-5, atol=1e-6)
    for got, expected in zip(tape.gradient(y, variables, output_gradients=dy), want[1:]):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=1e-5)
    jacobian = tape.batch_jacobian(y, variables[0]).numpy()        # (2, 3, 6, 3, 4)
    for b in range(2):
        for t in range(3):
            for e in range(6):
                seed = np.zeros_like(dy)
                seed[b, t, e] = 1
                np.testing.assert_allclose(jacobian[b, t, e], attention_numpy(q, k, v, seed)[1][b], atol=1e-5)


def test_cross_entropy_accuracy_and_embedding_kernels_against_numpy(nn):
    rng = np.random.default_rng(2)
    logits = (rng.standard_normal((7, 4)) * [[1e4], [1], [1], [1], [1], [1], [1]]).astype(np.float32)
    labels = rng.integers(0, 4, 7)
    loss64 = np.mean(sp.logsumexp(logits, axis=1) - logits[np.arange(7), labels].astype(np.float64))
    np.testing.assert_allclose(nn.cross_entropy(logits, labels).numpy(), loss64, rtol=1e-5)
    np.testing.assert_allclose(nn.accuracy(logits, labels).numpy(), np.mean(logits.argmax(1) == labels))
    dlogits = adc.grad(nn.cross_entropy, wrt="logits")(logits, labels).numpy()
    np.testing.assert_allclose(dlogits, (sp.softmax(logits.astype(np.float64), 1) - np.eye(4)[labels]) / 7,
                               atol=1e-7)
    table, tokens, targets = rng.standard_normal((5, 3)), np.array([4, 0, 4, 4, 1]), rng.standard_normal((5, 3))
    table, targets = table.astype(np.float32), targets.astype(np.float32)
    want = np.zeros((5, 3))
    np.add.at(want, tokens, 2 * (table[tokens] - targets) / 15)
    np.testing.assert_allclose(adc.grad(nn.embedding_loss, wrt="table")(table, tokens, targets).numpy(), want,
                               rtol=1e-5, atol=1e-7)


def test_the_nn_kernels_agree_with_jax_where_it_is_installed(nn):
    jax = pytest.importorskip("jax")    # a peer's values, checked when the peer is present
    jnp = jax.numpy
    rng = np.random.default_rng(3)
    q, k, v, dy = (rng.standard_normal((2, 5, 4)).astype(np.float32) for _ in range(4))

    def attention(q, k, v):
        return jax.nn.softmax(q @ k.transpose(0, 2, 1) / jnp.sqrt(jnp.float32(4)), -1) @ v

    y, pullback = jax.vjp(attention, q, k, v)
    variables = [adc.Variable(a) for a in (q, k, v)]
    with adc.GradientTape() as tape:
        ours = nn.attention(*variables)
    np.testing.assert_allclose(ours.numpy(), np.asarray(y), rtol=1e-5, atol=1e-6)
    for got, want in zip(tape.gradient(ours, variables, output_gradients=dy), pullback(dy)):
        np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-4, atol=1e-5)
    logits, labels = rng.standard_normal((6, 9)).astype(np.float32), rng.integers(0, 9, 6)
    loss = lambda x: jnp.mean(jax.nn.logsumexp(x, 1) - jnp.take_along_axis(x, labels[:, None], 1)[:, 0])  # noqa: E731
    np.testing.assert_allclose(adc.grad(nn.cross_entropy, wrt="logits")(logits, labels).numpy(),
                               np.asarray(jax.grad(loss)(logits)), rtol=1e-5, atol=1e-7)
