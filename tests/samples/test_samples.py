"""Every sample script of the guide runs and prints the guide's values."""
import subprocess
import sys

import pytest

from tests.support.repository import SAMPLES

EXPECTED = {
    "stop_recording.py": ["dz/dx: 4.0", "dz/dy: None"],
    "reset.py": ["dz/dx: 4.0", "dz/dy: None"],
    "stop_gradient.py": ["dz/dx: 4.0", "dz/dy: None", "kernel dz/dx: 4.0", "kernel dz/dy: None"],
    "multiple_tapes.py": ["1.0", "0.25"],
    "higher_order.py": ["dy_dx: 3.0", "d2y_dx2: 6.0", "d3y_dx3: 6.0"],
    "input_gradient_regularization.py": ["dense_relu [(5, 10), (10,)]", "dense_softplus [(5, 10), (10,)]"],
}


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_sample_prints_the_guides_values(script):
    result = subprocess.run([sys.executable, str(SAMPLES / script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert lines == EXPECTED[script]


def test_run_kernels_sample_matches_numpy():
    result = subprocess.run([sys.executable, str(SAMPLES / "run_kernels.py")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("max relative error vs NumPy") == 5
