"""How many examples each fuzz test tries: a fixed sample in CI, `ADC_FUZZ_EXAMPLES` in a long run.

    ADC_FUZZ_EXAMPLES=2000 python -m pytest tests/fuzz -p no:cacheprovider     # prints a table of outcomes
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

LONG_RUN = int(os.environ.get("ADC_FUZZ_EXAMPLES") or 0)


def fuzz_settings(ci_examples: int) -> settings:
    """CI: `ci_examples` derandomized examples, the same on every run; a long run: random ones."""
    return settings(max_examples=LONG_RUN or ci_examples, derandomize=not LONG_RUN, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.large_base_example])
