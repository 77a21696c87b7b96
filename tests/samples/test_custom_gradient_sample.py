"""samples/custom_gradients.py prints the guide's 2.0 in Python and after compile → load in a fresh
process, and the LookupError of a --no-gradients build."""
import subprocess
import sys

from tests.support.repository import SAMPLES


def test_custom_gradients_sample_reproduces_the_guide():
    result = subprocess.run([sys.executable, str(SAMPLES / "custom_gradients.py")], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "2.0",
        "2.0",
        "LookupError: No gradient defined for kernel 'clip_gradients' in forward_only.so: it was compiled "
        "with --no-gradients; recompile without it: adc compile custom_gradients.adc -o forward_only.so",
    ]
