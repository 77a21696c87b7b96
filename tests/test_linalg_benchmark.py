"""`benchmarks/run.py linalg --quick` runs: every route of every case agrees with adc's result (the
benchmark checks each before timing it) and prints its row. Timings are printed, never asserted."""
import re
import subprocess
import sys

from tests.support.repository import ROOT

CASES = ["(a) 500 SPD n=3: chol+solve+logdet", "(a) 500 SPD n=3: its gradient", "(a) 500 SPD n=8: its gradient",
         "(b) GP NLL + gradient, n=64", "(c) cholesky 48x48", "(c) solve 48x48", "(c) qr 48x48", "(c) eigh 48x48",
         "(c) svd 48x48", "(d) eigh of 200 8x8", "(d) svd of 200 8x8"]


def test_the_quick_linalg_benchmark_checks_and_prints_every_case():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "linalg", "--quick"],
                            capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    rows = {line[:44].strip(): line[44:].split() for line in result.stdout.splitlines() if line.startswith("(")}
    for case in CASES:
        cells = rows[case]
        assert len(cells) == 5 and all(re.fullmatch(r"[\d.]+|-", cell) for cell in cells), (case, cells)
