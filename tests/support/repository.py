"""Where the repository's folders are, for tests and the tools in tests/support/."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"
