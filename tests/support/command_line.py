"""The `adc` command run as a user runs it: a subprocess of this Python, its output captured."""
import subprocess
import sys

from tests.support.repository import SAMPLES

KERNELS = str(SAMPLES / "kernels.adc")      # the sample most command tests compile


def adc_cmd(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adc", *args], capture_output=True, text=True, cwd=cwd)
