"""The fuzz tests' tally of outcomes, printed at the end of a long run (tests/fuzz/budget.py)."""
from __future__ import annotations

import pytest

from tests.fuzz.budget import LONG_RUN
from tests.support.outcomes import Outcomes

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
