"""The Gaussian-process sample, briefly (20 points, 25 Adam steps): its gradient agrees with central
differences, its likelihood with NumPy's, Adam lowers it, and the posterior is drawn."""
import re
import subprocess
import sys

import matplotlib.image

from tests.support.repository import SAMPLES


def test_gaussian_process_sample_fits_and_draws(tmp_path):
    result = subprocess.run([sys.executable, str(SAMPLES / "gaussian_process.py"), str(tmp_path), "--points", "20",
                             "--steps", "25"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert float(re.search(r"gradient against central differences: (\S+)", out)[1]) < 1e-6
    assert float(re.search(r"likelihood against NumPy's: (\S+)", out)[1]) < 1e-12
    start, end = re.search(r"likelihood: (\S+) at the start, (\S+) after 25 Adam steps", out).groups()
    assert float(end) < float(start)
    assert re.search(r"length scale \S+, signal variance \S+, noise variance \S+", out)
    assert "figure gaussian_process.png: saved" in out
    image = matplotlib.image.imread(tmp_path / "gaussian_process.png")
    assert image.shape[0] > 100 and image[..., :3].std() > 0.05      # a drawn picture, not a blank one
