"""tape.jacobian on random compositions of eager ops: equal to central finite differences in
float64, and to the one-seed-at-a-time route (experimental_use_pfor=False). tape.batch_jacobian
on random compositions and batch sizes: the diagonal blocks of the full Jacobian when examples
stay apart, and a ValueError whenever the full Jacobian has a non-zero cross-example block.
adc.batch_jacobian of random compiled kernels: the same diagonal in both modes, or a CompileError."""
import numpy as np
import pytest
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
MIXING = {"column_mean"}        # the one step that makes example i depend on the others


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


@settings(max_examples=20, deadline=None)
@given(names=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=4), batch=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_batch_jacobian_is_the_diagonal_of_the_jacobian_or_refuses(names, batch, seed):
    x = adc.constant(np.random.default_rng(seed).uniform(-1.5, 1.5, (batch, 3)))
    with adc.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = composition(names, x)
    full = tape.jacobian(y, x).numpy()                       # (b, 3, b, 3)
    cross = full * (1 - np.eye(batch))[:, None, :, None]
    if MIXING.intersection(names):     # the rule is structural: a batch of 1 is refused too
        assert batch == 1 or np.abs(cross).max() > 1e-9     # the examples really mix here
        with pytest.raises(ValueError, match="examples mix in eager_reduce_mean"):
            tape.batch_jacobian(y, x)
        return
    assert not cross.any()
    for pfor in (True, False):
        np.testing.assert_allclose(tape.batch_jacobian(y, x, experimental_use_pfor=pfor).numpy(),
                                   np.einsum("bibj->bij", full), rtol=1e-12, atol=1e-14)


SOURCE_STEPS = {"sin": "sin(y)", "tanh": "tanh(y)", "square": "y * y", "matmul": "y @ w", "elu": "elu(y)",
                "softmax": "softmax(y, axis=1)", "scaled": "y * exp(w[0])", "center": "y - mean(y, axis=0)"}
SOURCE_MIXING = {"center"}


@settings(max_examples=8, deadline=None)
@given(names=st.lists(st.sampled_from(sorted(SOURCE_STEPS)), min_size=1, max_size=4), batch=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_compiled_batch_jacobians_are_the_diagonal_of_the_jacobian_or_refuse(names, batch, seed):
    """adc.batch_jacobian of a random kernel, in both modes (seeds folded by the one-hot pass): the
    diagonal blocks of adc.jacobian's full Jacobian, or a located CompileError when examples mix."""
    body = "".join(f"    y = {SOURCE_STEPS[name]} + x * 0.1\n" for name in names)
    m = adc.compile(f"def f(x: f64[B, I], w: f64[I, I]) -> f64[B, I]:\n    y = x\n{body}    return y\n",
                    "random_batch.adc")
    rng = np.random.default_rng(seed)
    x, w = rng.uniform(-1.5, 1.5, (batch, 3)), rng.uniform(-1, 1, (3, 3))
    if SOURCE_MIXING.intersection(names):
        with pytest.raises(adc.CompileError, match="examples mix"):
            adc.batch_jacobian(m.f)
        return
    diagonal = np.einsum("bibj->bij", adc.jacobian(m.f, wrt="x")(x, w).numpy())
    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(adc.batch_jacobian(m.f, mode=mode)(x, w).numpy(), diagonal,
                                   rtol=1e-12, atol=1e-14)
