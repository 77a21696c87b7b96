"""The finite-difference oracle itself: it must admit what rounding does to the differences of a
large result and still refuse a VJP that is wrong."""
import numpy as np
import pytest

from tests.support.gradcheck import assert_vjp_matches_differences


def saturated_product(xs):
    """|f| ~ 1e12 and a slope ~ 1e3 (the shape of a product of saturated tanh terms)."""
    (x,) = xs
    return (1e12 + 1e3 * np.sum(np.tanh(x)) + 0.0 * x[:1],)


def vjp_of_saturated_product(factor: float):
    def vjp(xs, cs):
        (x,), (c,) = xs, cs
        return [factor * c[0] * 1e3 / np.cosh(x) ** 2]
    return vjp


def check(factor: float, seed: int) -> None:
    x = np.random.default_rng(seed).uniform(-0.5, 0.5, 64)
    assert_vjp_matches_differences(saturated_product, vjp_of_saturated_product(factor), [x], [0],
                                   np.random.default_rng(seed), 1e-4, 1e-6, "saturated product")


@pytest.mark.parametrize("seed", range(8))
def test_a_right_vjp_of_a_result_far_larger_than_its_slope_passes(seed):
    check(1.0, seed)


@pytest.mark.parametrize("seed", range(8))
def test_a_vjp_wrong_by_ten_percent_still_fails(seed):
    with pytest.raises(AssertionError, match="finite differences give"):
        check(1.1, seed)
