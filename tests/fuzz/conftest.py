"""The fuzz tests' tally of outcomes, printed at the end of a long run (tests/fuzz/budget.py)."""
from __future__ import annotations

from collections import Counter

import pytest

from tests.fuzz.budget import LONG_RUN


class Outcomes:
    """How many programs had each outcome; a short repr in the report of a failing example."""

    def __init__(self):
        self.counts: Counter = Counter()

    def add(self, outcome: str) -> None:
        self.counts[outcome] += 1

    def __repr__(self) -> str:
        return f"<{sum(self.counts.values())} outcomes>"


OUTCOMES = pytest.StashKey[Outcomes]()


@pytest.fixture(scope="session")
def outcomes(request) -> Outcomes:
    return request.config.stash.setdefault(OUTCOMES, Outcomes())


def pytest_terminal_summary(terminalreporter, config):
    tally = config.stash.get(OUTCOMES, None)
    if LONG_RUN and tally:
        terminalreporter.section(f"adc fuzz outcomes, ADC_FUZZ_EXAMPLES={LONG_RUN}")
        for outcome, n in sorted(tally.counts.items()):
            terminalreporter.line(f"{n:8d}  {outcome}")
