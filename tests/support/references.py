"""NumPy versions of the sample kernels, computed in float64: the oracle for end-to-end tests."""
import numpy as np


def relu(v):
    return np.maximum(v, 0)


def dense_relu(x, w, b):
    return relu(x @ w + b)


def mlp_loss(x, w1, b1, w2, b2):
    return np.mean(relu(dense_relu(x, w1, b1) @ w2 + b2) ** 2)


def sigmoid_shift(x, delta):
    return 1 / (1 + np.exp(-(x + delta)))


def batchnorm(h):
    mu = h.mean(axis=0)
    var = ((h - mu) ** 2).mean(axis=0)
    return (h - mu) / np.sqrt(var + 0.001)


def logsumexp_rows(x):
    m = x.max(axis=1, keepdims=True)
    return np.log(np.exp(x - m).sum(axis=1)) + m[:, 0]


def sample_inputs(rng, b=6, i=5, h=7, o=3, n=9):
    f32 = np.float32
    return {
        "dense_relu": (rng.standard_normal((b, i), f32), rng.standard_normal((i, o), f32),
                       rng.standard_normal(o, f32)),
        "mlp_loss": (rng.standard_normal((b, i), f32), rng.standard_normal((i, h), f32),
                     rng.standard_normal(h, f32), rng.standard_normal((h, o), f32), rng.standard_normal(o, f32)),
        "sigmoid_shift": (rng.standard_normal(n, f32) * 10, f32(0.25)),
        "batchnorm": (rng.standard_normal((b, h), f32),),
        "logsumexp_rows": (rng.standard_normal((b, n)) * 30,),
    }
