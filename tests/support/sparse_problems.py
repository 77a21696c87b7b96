"""What the sparsity tests share: structured problems whose Jacobian patterns are known exactly
(for the analysis, sparse derivatives in process and those in a shared object), random patterns,
a pattern as a dense mask, and where a result moves by central differences."""
import numpy as np
from hypothesis import strategies as st

from adc.ir.interp import run
from adc.passes.sparsity.coloring import acyclic_coloring
from adc.passes.sparsity.compression import seeds
from adc.passes.sparsity.patterns import Pattern
from adc.passes.sparsity.substitution import substitution


def dense(pattern: Pattern) -> np.ndarray:
    out = np.zeros((pattern.rows, pattern.columns), bool)
    out[pattern.row_ids(), pattern.indices] = True
    return out


def differences(module, name: str, args, wrt: int, result: int, step: float = 1e-6) -> np.ndarray:
    """Where result `result` moves when one element of param `wrt` moves (result size × wrt size)."""
    x = np.asarray(args[wrt])
    moved = np.zeros((np.asarray(run(module, name, *args)[result]).size, x.size), bool)
    for j in range(x.size):
        sides = []
        for sign in (1, -1):
            shifted = x.copy().ravel()
            shifted[j] += sign * step
            changed = list(args)
            changed[wrt] = shifted.reshape(x.shape)
            sides.append(np.asarray(run(module, name, *changed)[result], np.float64).ravel())
        delta = sides[0] - sides[1]
        moved[:, j] = (delta != 0) & np.isfinite(delta)
    return moved


@st.composite
def patterns(draw, square=False):
    m = draw(st.integers(1, 12))
    n = m if square else draw(st.integers(1, 12))
    mask = np.array(draw(st.lists(st.booleans(), min_size=m * n, max_size=m * n))).reshape(m, n)
    if square:
        mask = mask | mask.T
    r, c = np.nonzero(mask)
    return Pattern.from_pairs(r, c, (m, n))



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


def symmetric_problem(n: int, density: float, seed: int = 0):
    """A random symmetric matrix of n rows, its pattern, the substitution of its acyclic coloring,
    and the products of that coloring's seeds (adc/passes/sparsity/substitution.py)."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n, n)) < density
    mask = mask | mask.T | np.eye(n, dtype=bool)
    h = np.where(mask, rng.uniform(-1, 1, (n, n)), 0.0)
    h = h + h.T
    pattern = Pattern.from_pairs(*np.nonzero(mask), (n, n))
    colors = acyclic_coloring(pattern)
    products = (h @ seeds(colors, np.float64).T).T.ravel()
    return h, pattern, substitution(pattern, colors), products
