"""Run the sample kernels and compare each with NumPy.

    python samples/run_kernels.py                # compile samples/kernels.adc in process
    python samples/run_kernels.py kernels.so     # use a shared object from `adc compile`
"""
import sys
from pathlib import Path

import numpy as np

import adc

HERE = Path(__file__).parent


def relu(v):
    return np.maximum(v, 0)


def reference(name, *args):
    """The NumPy version of each kernel of kernels.adc."""
    if name == "dense_relu":
        x, w, b = args
        return relu(x @ w + b)
    if name == "mlp_loss":
        x, w1, b1, w2, b2 = args
        return np.mean(relu(relu(x @ w1 + b1) @ w2 + b2) ** 2)
    if name == "sigmoid_shift":
        x, delta = args
        return 1 / (1 + np.exp(-(x + delta)))
    if name == "batchnorm":
        (h,) = args
        mu = h.mean(axis=0)
        return (h - mu) / np.sqrt(((h - mu) ** 2).mean(axis=0) + 0.001)
    (x,) = args
    m = x.max(axis=1, keepdims=True)
    return np.log(np.exp(x - m).sum(axis=1)) + m[:, 0]


def main(argv):
    module = adc.load(argv[1]) if len(argv) > 1 else adc.compile_file(HERE / "kernels.adc")
    print(module)
    rng = np.random.default_rng(0)
    f32 = np.float32
    inputs = {
        "dense_relu": (rng.standard_normal((4, 3), f32), rng.standard_normal((3, 2), f32), rng.standard_normal(2, f32)),
        "mlp_loss": (rng.standard_normal((8, 5), f32), rng.standard_normal((5, 6), f32), rng.standard_normal(6, f32),
                     rng.standard_normal((6, 3), f32), rng.standard_normal(3, f32)),
        "sigmoid_shift": (np.linspace(-4, 4, 5, dtype=f32), f32(0.5)),
        "batchnorm": (rng.standard_normal((6, 4), f32),),
        "logsumexp_rows": (rng.standard_normal((3, 7)) * 50,),
    }
    worst = 0.0
    for name in module.kernels:
        got = np.asarray(getattr(module, name)(*inputs[name]))
        want = reference(name, *[np.asarray(a, np.float64) for a in inputs[name]])
        err = float(np.max(np.abs(got - want) / (1 + np.abs(want)))) if got.size else 0.0
        worst = max(worst, err)
        print(f"{name:15s} shape {str(got.shape):8s} max relative error vs NumPy {err:.2e}")
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
