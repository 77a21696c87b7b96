"""Shared fixtures: the sample module compiled once per session, in process and as a .so."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


@pytest.fixture(scope="session")
def kernels_module():
    import adc

    return adc.compile_file(SAMPLES / "kernels.adc")


@pytest.fixture(scope="session")
def kernels_so(tmp_path_factory):
    """samples/kernels.adc compiled by the command line, as a user would."""
    out = tmp_path_factory.mktemp("so") / "kernels.so"
    subprocess.run([sys.executable, "-m", "adc", "compile", str(SAMPLES / "kernels.adc"), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    return out
