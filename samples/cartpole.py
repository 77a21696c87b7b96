"""Cart-pole swing-up by direct collocation (samples/cartpole.adc), solved by IPOPT through
cyipopt, with adc supplying every derivative: the effort's gradient, the constraint Jacobian and
the Lagrangian's Hessian, the last two as sparse matrices whose patterns adc detects from the
kernels' IR and fills with a few colored, batched JVPs per call.

Prints the problem's size, each matrix's nonzeros and colors, IPOPT's outcome, the largest
constraint violation and KKT residual measured here from IPOPT's multipliers, and saves
cartpole.png: the cart's position, the pole's angle and the force over time.
Usage: python cartpole.py [figures folder] [--knots K]    (cyipopt: pip install 'adc[ipopt]')
"""
import argparse
import time
from pathlib import Path

import numpy as np

import adc

cartpole = adc.compile_file(Path(__file__).with_name("cartpole.adc"))
DURATION = 2.0                                  # seconds
GOAL = np.array([1.0, np.pi, 0.0, 0.0])         # cart 1 m on, pole upright, both at rest
TRACK, FORCE = 2.0, 20.0                        # |cart position| <= 2 m, |force| <= 20 N


def bounds(knots: int) -> tuple[np.ndarray, np.ndarray]:
    """The variables' bounds, [knots, 5] each: the track and the force limit; the first knot's
    state fixed at rest, pole down (lower = upper)."""
    lower, upper = np.full((knots, 5), -np.inf), np.full((knots, 5), np.inf)
    lower[:, 0], upper[:, 0] = -TRACK, TRACK
    lower[:, 4], upper[:, 4] = -FORCE, FORCE
    lower[0, :4] = upper[0, :4] = 0.0
    return lower, upper


def initial_guess(knots: int) -> np.ndarray:
    """A straight line from the start to the goal, no force (Kelly's guess)."""
    z = np.zeros((knots, 5))
    z[:, :4] = np.linspace(0.0, 1.0, knots)[:, None] * GOAL
    return z


class SwingUp:
    """The NLP as cyipopt's callbacks (flat vectors in, flat vectors out), adc's kernels behind
    them: min effort(z) s.t. constraints(z) = 0 and the bounds. The sparse Jacobian and Hessian
    are built at `guess`, so their patterns (and colorings) are ready before IPOPT asks."""

    def __init__(self, knots: int, guess: np.ndarray):
        self.shape = (knots, 5)
        self.gradient_kernel = adc.grad(cartpole.effort, wrt="z")
        self.jacobian_kernel = adc.jacobian(cartpole.constraints, wrt="z", sparse=True)
        self.hessian_kernel = adc.hessian(cartpole.lagrangian, wrt="z", sparse=True)
        self.jacobian_pattern = self.jacobian_kernel(guess, DURATION, GOAL).tocoo()
        full = self.hessian_kernel(guess, DURATION, GOAL, 1.0, np.zeros((knots, 4))).tocoo()
        self.lower = np.flatnonzero(full.row >= full.col)       # IPOPT takes the lower triangle
        self.hessian_rows, self.hessian_columns = full.row[self.lower], full.col[self.lower]
        self.jacobian_values, self.hessian_values = np.empty(self.jacobian_pattern.nnz), np.empty(full.nnz)

    def objective(self, z):
        return float(cartpole.effort(z.reshape(self.shape), DURATION))

    def gradient(self, z):
        return self.gradient_kernel(z.reshape(self.shape), DURATION).numpy().ravel()

    def constraints(self, z):
        return cartpole.constraints(z.reshape(self.shape), DURATION, GOAL).numpy().ravel()

    def jacobianstructure(self):
        return self.jacobian_pattern.row, self.jacobian_pattern.col

    def jacobian(self, z):
        return self.jacobian_kernel.values(z.reshape(self.shape), DURATION, GOAL, out=self.jacobian_values)

    def hessianstructure(self):
        return self.hessian_rows, self.hessian_columns

    def hessian(self, z, multipliers, objective_factor):
        self.hessian_kernel.values(z.reshape(self.shape), DURATION, GOAL, objective_factor,
                                   multipliers.reshape(self.shape[0], 4), out=self.hessian_values)
        return self.hessian_values[self.lower]


IPOPT_OPTIONS = {"print_level": 0, "sb": "yes", "tol": 1e-8}


class Counted:
    """Callbacks that also count IPOPT's iterations (cyipopt's `intermediate` hook)."""

    def __init__(self, callbacks):
        self.callbacks, self.iterations = callbacks, 0

    def __getattr__(self, name):
        return getattr(self.callbacks, name)

    def intermediate(self, mode, iteration, *progress):
        self.iterations = iteration
        return True


def solve(callbacks, knots: int, options=IPOPT_OPTIONS) -> dict:
    """IPOPT through cyipopt on `callbacks` (SwingUp's interface) from the initial guess: cyipopt's
    info (x, mult_g, mult_x_L, mult_x_U, status, ...) and the iterations taken."""
    import cyipopt      # the `ipopt` extra
    lower, upper = bounds(knots)
    counted = Counted(callbacks)
    problem = cyipopt.Problem(n=knots * 5, m=knots * 4, problem_obj=counted, lb=lower.ravel(), ub=upper.ravel(),
                              cl=np.zeros(knots * 4), cu=np.zeros(knots * 4))
    for name, value in options.items():
        problem.add_option(name, value)
    _, info = problem.solve(initial_guess(knots).ravel())
    return info | {"iterations": counted.iterations}


def kkt_residuals(callbacks, info) -> tuple[float, float]:
    """The largest constraint violation and the largest entry of the Lagrangian's gradient,
    ∇f + Jᵀλ - z_L + z_U, at IPOPT's solution and multipliers, computed here by adc."""
    z, multipliers = info["x"], info["mult_g"]
    violation = np.abs(callbacks.constraints(z)).max()
    pattern = callbacks.jacobian_pattern
    transposed = np.bincount(pattern.col, callbacks.jacobian(z) * multipliers[pattern.row], minlength=z.size)
    stationarity = callbacks.gradient(z) + transposed - info["mult_x_L"] + info["mult_x_U"]
    return float(violation), float(np.abs(stationarity).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", help="where the figure goes (figures.py)")
    parser.add_argument("--knots", type=int, default=201, help="collocation knots")
    knots = parser.parse_args().knots
    start = time.perf_counter()
    callbacks = SwingUp(knots, initial_guess(knots))
    print(f"cart-pole swing-up, {knots} knots: {knots * 5} variables, {knots * 4} constraints "
          f"(patterns and colorings in {time.perf_counter() - start:.2f} s)")
    print(f"constraint Jacobian: {callbacks.jacobian_pattern.nnz} nonzeros, {callbacks.jacobian_kernel.colors} colors")
    print(f"Lagrangian Hessian: {len(callbacks.lower)} nonzeros in its lower triangle, "
          f"{callbacks.hessian_kernel.colors} colors")
    start = time.perf_counter()
    info = solve(callbacks, knots)
    print(f"IPOPT: {info['status_msg'].decode()} (status {info['status']}) in {info['iterations']} iterations, "
          f"{time.perf_counter() - start:.2f} s")
    violation, stationarity = kkt_residuals(callbacks, info)
    print(f"effort {info['obj_val']:.4f} N²s; constraint violation {violation:.1e}, KKT residual {stationarity:.1e}")
    z = info["x"].reshape(knots, 5)
    print(f"largest force {np.abs(z[:, 4]).max():.2f} N, cart travels up to {z[:, 0].max():.3f} m")
    draw(z)


def draw(z: np.ndarray) -> None:
    from figures import save
    time_points = np.linspace(0.0, DURATION, len(z))

    def plot(plt):
        axes = plt.gcf().subplots(3, 1, sharex=True)
        for axis, column, label in zip(axes, (0, 1, 4), ("cart position (m)", "pole angle (rad)", "force (N)")):
            axis.plot(time_points, z[:, column])
            axis.set_ylabel(label)
        axes[-1].set_xlabel("time (s)")
        axes[0].set_title("cart-pole swing-up: IPOPT with adc's sparse derivatives")
    save("cartpole.png", plot)


if __name__ == "__main__":
    main()
