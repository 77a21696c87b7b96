"""How close computed floats are to a reference: within the tolerance of their dtype, or how many
units in the last place apart."""
import numpy as np


def assert_close(got, want, dtype) -> None:
    """`got` equals `want` to float32's or float64's rounding (booleans compared as `got`'s dtype)."""
    tol = 2e-6 if np.dtype(dtype) == np.float32 else 1e-13
    np.testing.assert_allclose(got, np.asarray(want).astype(got.dtype) if got.dtype == bool else want,
                               rtol=tol, atol=tol)


def ulp_error(got, want):
    """|got - want| in units in the last place of the type (denormal steps count as ulps); nan==nan."""
    ity = np.int32 if got.dtype == np.float32 else np.int64
    def ordered(a):
        i = a.view(ity).astype(np.int64)
        return np.where(i < 0, np.iinfo(ity).min - i, i)
    err = np.abs(ordered(got) - ordered(want)).astype(float)
    both_nan = np.isnan(got) & np.isnan(want)
    err[both_nan] = 0
    err[np.isnan(got) != np.isnan(want)] = np.inf
    return err
