"""The `adc` command run as a user runs it: a subprocess of this Python, its output captured."""
import os
import subprocess
import sys

from tests.support.repository import ROOT, SAMPLES

KERNELS = str(SAMPLES / "kernels.adc")      # the sample most command tests compile


def adc_cmd(*args, cwd=None) -> subprocess.CompletedProcess:
    """`python -m adc ARGS` in `cwd`, finding this checkout's adc wherever it runs (installed or not)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "adc", *args], capture_output=True, text=True, cwd=cwd, env=env)
