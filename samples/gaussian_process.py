"""Gaussian-process regression: three hyperparameters fitted by Adam on the negative log marginal
likelihood of samples/gaussian_process.adc (cholesky, cho_solve, log det K = 2 Σ log diag L),
whose gradient adc compiles.

Prints the gradient against central differences and the likelihood against NumPy's (slogdet and
solve, LAPACK) at the start, the fitted length scale, signal and noise variances, and saves
gaussian_process.png: the data, the posterior mean and mean ± 2σ.
Usage: python gaussian_process.py [figures folder] [--points N] [--steps S]
"""
import argparse
from pathlib import Path

import numpy as np

import adc
from figures import save

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("folder", nargs="?", help="where the figure goes (figures.py)")
parser.add_argument("--points", type=int, default=80, help="training points")
parser.add_argument("--steps", type=int, default=300, help="Adam steps")
options = parser.parse_args()

gp = adc.compile_file(Path(__file__).with_name("gaussian_process.adc"))
rng = np.random.default_rng(0)
x = np.sort(rng.uniform(-4.0, 4.0, options.points))
y = np.sin(1.5 * x) + 0.3 * x + 0.2 * rng.standard_normal(options.points)
value_and_gradient = adc.value_and_grad(gp.neg_log_likelihood, wrt="log_params")


def numpy_neg_log_likelihood(log_params):
    """The same likelihood from NumPy's LAPACK calls: the independent reference."""
    length, signal, noise = np.exp(log_params)
    k = signal * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / length ** 2) + noise * np.eye(len(x))
    return 0.5 * y @ np.linalg.solve(k, y) + 0.5 * np.linalg.slogdet(k)[1] + 0.5 * len(x) * np.log(2 * np.pi)


start = np.log([1.0, 1.0, 0.5])          # length scale, signal variance, noise variance
value, gradient = (t.numpy() for t in value_and_gradient(x, y, start))
h = 1e-6
central = np.array([(gp.neg_log_likelihood(x, y, start + h * e).numpy()
                     - gp.neg_log_likelihood(x, y, start - h * e).numpy()) / (2 * h) for e in np.eye(3)])
print(f"gradient against central differences: {np.abs(gradient - central).max() / np.abs(central).max():.1e}")
print(f"likelihood against NumPy's: {abs(value - numpy_neg_log_likelihood(start)) / abs(value):.1e}")

# Adam (Kingma and Ba), in NumPy, on the adc-computed gradient
log_params, m, v = start.copy(), np.zeros(3), np.zeros(3)
rate, beta1, beta2 = 0.05, 0.9, 0.999
for step in range(1, options.steps + 1):
    value, gradient = (t.numpy() for t in value_and_gradient(x, y, log_params))
    m = beta1 * m + (1 - beta1) * gradient
    v = beta2 * v + (1 - beta2) * gradient ** 2
    log_params -= rate * (m / (1 - beta1 ** step)) / (np.sqrt(v / (1 - beta2 ** step)) + 1e-8)
final = float(gp.neg_log_likelihood(x, y, log_params))
print(f"negative log likelihood: {float(gp.neg_log_likelihood(x, y, start)):.3f} at the start, "
      f"{final:.3f} after {options.steps} Adam steps")
length, signal, noise = np.exp(log_params)
print(f"length scale {length:.3f}, signal variance {signal:.3f}, noise variance {noise:.4f} (data's 0.04)")

grid = np.linspace(-5.0, 5.0, 200)
mean, variance = (t.numpy() for t in gp.posterior(x, y, log_params, grid))
sigma = np.sqrt(np.maximum(variance, 0.0))


def draw_posterior(plt):
    plt.fill_between(grid, mean - 2 * sigma, mean + 2 * sigma, alpha=0.3, label="mean ± 2σ")
    plt.plot(grid, mean, label="posterior mean")
    plt.plot(x, y, "k.", markersize=4, label="data")
    plt.legend()
    plt.title("Gaussian-process regression")


save("gaussian_process.png", draw_posterior)
