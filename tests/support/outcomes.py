"""A tally of what happened to each generated program (compiled and agreed, a located error of some
kind, ...): the fuzz tests count into it, and a long run prints it (tests/fuzz/conftest.py)."""
from __future__ import annotations

from collections import Counter


class Outcomes:
    """How many programs had each outcome; a short repr in the report of a failing example."""

    def __init__(self):
        self.counts: Counter = Counter()

    def add(self, outcome: str) -> None:
        self.counts[outcome] += 1

    def __repr__(self) -> str:
        return f"<{sum(self.counts.values())} outcomes>"
