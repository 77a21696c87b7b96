"""The Jacobian samples run, print the guide's shapes and values, and save the guide's figures
(matplotlib is a test extra, so the figures are drawn here; a user without it gets the values)."""
import re
import subprocess
import sys

import matplotlib.image
import pytest

from tests.support.repository import SAMPLES

FIGURES = {"jacobians.py": ["jacobian_sigmoid.png"], "hessian_newton.py": ["hessian.png"],
           "batch_jacobian.py": ["batch_jacobian_patches.png", "batch_jacobian_patches_batchnorm.png"]}
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
    saved = [line.split()[1].rstrip(":") for line in lines if line.startswith("figure ") and "saved" in line]
    assert saved == FIGURES[script]
    for name in saved:
        image = matplotlib.image.imread(tmp_path / name)
        assert image.shape[0] > 100 and image[..., :3].std() > 0.05      # a drawn picture, not a blank one
    if script == "hessian_newton.py":
        newton = re.search(r"loss before ([\d.]+), after one Newton step ([\d.]+)", result.stdout)
        assert float(newton[2]) < float(newton[1])
        difference = re.search(r"Newton step, adc's solve against NumPy's: (\S+)", result.stdout)
        assert float(difference[1]) < 1e-4         # both solve the damped Hessian in f32

