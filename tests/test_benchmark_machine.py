"""benchmarks/machine.py's CPU line: a run in a process pinned to fewer processors than the machine
has (taskset, a cpuset), where adc's threads default to those it may use, says so."""
import os
import subprocess
import sys

from tests.support.repository import ROOT

CORES = """
import os, sys
sys.path.insert(0, "benchmarks")
import machine
if len(sys.argv) > 1:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
print(machine.cores())
"""


def cores_line(*pinned: str) -> str:
    result = subprocess.run([sys.executable, "-c", CORES, *pinned], capture_output=True, text=True, timeout=120,
                            cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_cpu_line_names_the_processors_a_pinned_run_may_use():
    everything = os.cpu_count()
    if len(os.sched_getaffinity(0)) == everything:
        assert cores_line() == f"{everything} cores"
    pinned = cores_line("pinned")
    assert pinned == (f"{everything} cores, 1 usable by this process" if everything > 1 else "1 cores")
