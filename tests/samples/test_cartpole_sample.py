"""samples/cartpole.py, the cart-pole swing-up solved by IPOPT with adc's sparse derivatives, on
small grids: adc's sparse constraint Jacobian and Lagrangian Hessian equal the dense ones and
CasADi's (the same NLP written in SX, tests/support/cartpole_casadi.py), IPOPT converges with
them (constraints and KKT conditions met, the figure drawn), to CasADi's own nlpsol's optimum."""
import importlib.util
import re
import subprocess
import sys

import matplotlib.image
import numpy as np
import pytest

from tests.support.cartpole_casadi import CasadiSwingUp, casadi_solver
from tests.support.repository import SAMPLES

KNOTS = 21


def load_sample():
    spec = importlib.util.spec_from_file_location("cartpole_sample", SAMPLES / "cartpole.py")
    sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)
    return sample


@pytest.fixture(scope="module")
def sample():
    return load_sample()


def a_point(knots: int, seed: int = 0):
    """A trajectory off the initial guess, the multipliers and objective factor IPOPT might pass."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(-1.0, 1.0, (knots, 5)) * [1.0, 3.0, 2.0, 5.0, 10.0]
    return z.ravel(), rng.standard_normal(knots * 4), 0.7


def as_dense(structure, values, shape) -> np.ndarray:
    out = np.zeros(shape)
    np.add.at(out, tuple(np.asarray(s) for s in structure), values)
    return out


def test_the_sparse_derivatives_equal_the_dense_ones(sample):
    adc = sample.adc
    callbacks = sample.SwingUp(KNOTS, sample.initial_guess(KNOTS))
    z, multipliers, factor = a_point(KNOTS)
    grid = z.reshape(KNOTS, 5)
    args = (grid, sample.DURATION, sample.GOAL)
    jacobian = as_dense(callbacks.jacobianstructure(), callbacks.jacobian(z), (KNOTS * 4, KNOTS * 5))
    dense_jacobian = adc.jacobian(sample.cartpole.constraints, wrt="z")(*args).numpy().reshape(KNOTS * 4, -1)
    np.testing.assert_allclose(jacobian, dense_jacobian, rtol=1e-12, atol=1e-12)
    lower = as_dense(callbacks.hessianstructure(), callbacks.hessian(z, multipliers, factor), (KNOTS * 5,) * 2)
    dense_hessian = adc.hessian(sample.cartpole.lagrangian, wrt="z")(
        *args, factor, multipliers.reshape(KNOTS, 4)).numpy().reshape(KNOTS * 5, -1)
    np.testing.assert_allclose(lower, np.tril(dense_hessian), rtol=1e-12, atol=1e-12)
    assert callbacks.jacobian_kernel.colors <= 10 and callbacks.hessian_kernel.colors <= 10   # whatever the knots


def test_the_derivatives_equal_casadis(sample):
    casadi = pytest.importorskip("casadi")     # the `ipopt` extra
    ours, theirs = sample.SwingUp(KNOTS, sample.initial_guess(KNOTS)), CasadiSwingUp(
        casadi, KNOTS, sample.DURATION, sample.GOAL)
    z, multipliers, factor = a_point(KNOTS, seed=1)
    assert ours.objective(z) == pytest.approx(theirs.objective(z), rel=1e-13)
    np.testing.assert_allclose(ours.gradient(z), theirs.gradient(z), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours.constraints(z), theirs.constraints(z), rtol=1e-12, atol=1e-12)
    for name, shape, args in (("jacobian", (KNOTS * 4, KNOTS * 5), (z,)),
                              ("hessian", (KNOTS * 5,) * 2, (z, multipliers, factor))):
        mine = as_dense(getattr(ours, f"{name}structure")(), getattr(ours, name)(*args), shape)
        other = as_dense(getattr(theirs, f"{name}structure")(), getattr(theirs, name)(*args), shape)
        np.testing.assert_allclose(mine, other, rtol=1e-11, atol=1e-11)


def test_ipopt_reaches_casadis_optimum(sample):
    pytest.importorskip("cyipopt")          # the `ipopt` extra
    casadi = pytest.importorskip("casadi")
    callbacks = sample.SwingUp(KNOTS, sample.initial_guess(KNOTS))
    info = sample.solve(callbacks, KNOTS)
    assert info["status"] == 0, info["status_msg"]
    violation, stationarity = sample.kkt_residuals(callbacks, info)
    assert violation < 1e-9 and stationarity < 1e-7
    lower, upper = sample.bounds(KNOTS)
    solver = casadi_solver(casadi, KNOTS, sample.DURATION, sample.GOAL, sample.IPOPT_OPTIONS)
    theirs = solver(x0=sample.initial_guess(KNOTS).ravel(), lbx=lower.ravel(), ubx=upper.ravel(), lbg=0, ubg=0)
    assert solver.stats()["success"]
    assert info["obj_val"] == pytest.approx(float(theirs["f"]), rel=1e-8)
    np.testing.assert_allclose(info["x"], np.asarray(theirs["x"]).ravel(), atol=1e-6)


def test_the_script_solves_and_draws(tmp_path):
    pytest.importorskip("cyipopt")
    result = subprocess.run([sys.executable, str(SAMPLES / "cartpole.py"), str(tmp_path), "--knots", str(KNOTS)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"{KNOTS} knots: {KNOTS * 5} variables, {KNOTS * 4} constraints" in out
    assert re.search(r"constraint Jacobian: \d+ nonzeros, \d+ colors", out)
    assert "(status 0)" in out
    violation, residual = re.search(r"constraint violation (\S+), KKT residual (\S+)", out).groups()
    assert float(violation) < 1e-9 and float(residual) < 1e-7
    assert "figure cartpole.png: saved" in out
    image = matplotlib.image.imread(tmp_path / "cartpole.png")
    assert image.shape[0] > 100 and image[..., :3].std() > 0.05      # a drawn picture, not a blank one
