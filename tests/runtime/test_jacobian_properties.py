"""tape.jacobian on random compositions of eager ops: equal to central finite differences in
float64, and to the one-seed-at-a-time route (experimental_use_pfor=False)."""
import numpy as np
from hypothesis import given, settings, strategies as st

import adc

SHAPE = (2, 3)
MATRIX = np.arange(9.0).reshape(3, 3) / 9 - 0.4
STEPS = {
    "sin": adc.sin,
    "tanh": adc.tanh,
    "square": lambda y: y ** 2,
    "scale": lambda y: y * np.array([0.5, -1.0, 2.0]),
    "matmul": lambda y: y @ MATRIX,
    "row_sum": lambda y: y + adc.reduce_sum(y, axis=1, keepdims=True),
    "column_mean": lambda y: y * adc.reduce_mean(y, axis=0),
}


def composition(names, x):
    y = x
    for name in names:
        y = STEPS[name](y) + x * 0.1        # a skip connection: x reaches the target several ways
    return y


@settings(max_examples=12, deadline=None)
@given(names=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=4),
       values=st.lists(st.floats(-1.5, 1.5), min_size=6, max_size=6))
def test_jacobian_matches_finite_differences_and_the_per_seed_route(names, values):
    x0 = np.array(values).reshape(SHAPE)
    x = adc.constant(x0)
    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = composition(names, x)
    j = tape.jacobian(y, x).numpy()
    np.testing.assert_allclose(j, tape.jacobian(y, x, experimental_use_pfor=False).numpy(), atol=1e-12)
    step, columns = 1e-6, []
    for k in range(x0.size):
        e = step * np.eye(x0.size)[k].reshape(SHAPE)
        difference = composition(names, adc.constant(x0 + e)).numpy() - composition(names, adc.constant(x0 - e)).numpy()
        columns.append(difference / (2 * step))
    np.testing.assert_allclose(j, np.stack(columns, axis=-1).reshape(SHAPE + SHAPE), rtol=1e-6, atol=1e-6)
