"""Structured problems whose Jacobian patterns are known exactly, shared by the sparsity tests
of the analysis, of sparse derivatives in process and of those in a shared object."""
import numpy as np

# A tridiagonal stencil on its interior; the ends are x * x (one nonzero each).
TRIDIAGONAL = """
def f(x: f64[N]) -> f64[N]:
    y = x * x
    y[1:N-1] = x[:N-2] - 2.0 * sin(x[1:N-1]) + x[2:]
    return y
"""


# The 2-D Brusselator's residual on an N x N periodic grid (u and v stacked as x[0] and x[1]):
# each equation reads its own point's u and v, and its species at the four neighbours.
BRUSSELATOR = """
def laplacian(u: f64[N, N]) -> f64[N, N]:
    up = concat([u[N-1:, :], u[:N-1, :]], axis=0)
    down = concat([u[1:, :], u[:1, :]], axis=0)
    left = concat([u[:, N-1:], u[:, :N-1]], axis=1)
    right = concat([u[:, 1:], u[:, :1]], axis=1)
    return up + down + left + right - 4.0 * u

def brusselator(x: f64[2, N, N]) -> f64[2, N, N]:
    u = x[0]
    v = x[1]
    du = 1.0 + u * u * v - 4.4 * u + 0.1 * laplacian(u)
    dv = 3.4 * u - u * u * v + 0.1 * laplacian(v)
    return stack([du, dv])
"""


def brusselator_pattern(n: int) -> np.ndarray:
    grid = np.arange(n * n).reshape(n, n)
    want = np.zeros((2 * n * n, 2 * n * n), bool)
    for species in range(2):
        for i in range(n):
            for j in range(n):
                row = species * n * n + grid[i, j]
                want[row, grid[i, j]] = want[row, n * n + grid[i, j]] = True
                for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                    want[row, species * n * n + grid[(i + di) % n, (j + dj) % n]] = True
    return want
