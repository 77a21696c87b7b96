"""samples/torch_training.py and samples/jax_training.py: a PyTorch model trained with Adam and a
JAX loop trained with optax, each with adc's cross-entropy as its loss, reach the framework's own
losses (the samples assert it, to float32 rounding); here with a few steps."""
import re
import subprocess
import sys

import pytest

from tests.support.repository import SAMPLES

STEPS = "12"


def run(script: str) -> str:
    result = subprocess.run([sys.executable, str(SAMPLES / script), STEPS], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def losses(text: str, other: str) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in re.findall(rf"adc loss ([\d.]+)  {other} loss ([\d.]+)", text)]


def test_the_torch_sample_trains_as_torch_own_loss_does():
    pytest.importorskip("torch")
    out = run("torch_training.py")
    pairs = losses(out, "torch")
    assert len(pairs) == 12 and all(abs(a - b) < 1e-4 for a, b in pairs), out
    assert pairs[-1][0] < pairs[0][0]
    assert "adc/torch = " in out


def test_the_jax_sample_trains_as_optax_own_loss_does():
    pytest.importorskip("jax")
    pytest.importorskip("optax")
    out = run("jax_training.py")
    pairs = losses(out, "jax")
    assert len(pairs) == 12 and all(abs(a - b) < 1e-4 for a, b in pairs), out
    assert pairs[-1][0] < pairs[0][0]
    assert "adc/jax = " in out
