"""The Jacobian samples run and print the guide's shapes and values (figures are optional)."""
import re
import subprocess
import sys

import pytest

from tests.conftest import SAMPLES

EXPECTED = {
    "jacobians.py": ["(201,) (201,)", "max dy/dx: 0.25", "(7, 10) (5, 10) (7, 10, 5, 10)",
                     "gradient == jacobian summed over the target: True"],
    "hessian_newton.py": ["layer.kernel.shape: (5, 8)", "h.shape: (5, 8, 5, 8)", "symmetric: True"],
    "batch_jacobian.py": ["(7, 6, 7, 5)", "(7, 6, 5)", "batch_jacobian == jacobian summed over the source batch: True",
                          "accepted with allow_cross_example=True: (7, 6, 5)"],
}


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_jacobian_sample_prints_the_guides_values(script, tmp_path):
    result = subprocess.run([sys.executable, str(SAMPLES / script), str(tmp_path)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = [line.strip() for line in result.stdout.splitlines()]
    for line in EXPECTED[script]:
        assert line in lines
    figures = [line for line in lines if line.startswith("figure ")]
    assert figures and all(("saved" in f) or ("skipped" in f) for f in figures)
    newton = re.search(r"loss before ([\d.]+), after one Newton step ([\d.]+)", result.stdout)
    assert script != "hessian_newton.py" or float(newton[2]) < float(newton[1])

