"""The trampoline (adc/ir/trampoline.py): exceptions travel up through suspended generators as
through frames, and a generator that catches one goes on as a function would."""
from __future__ import annotations

import pytest

from adc.ir.trampoline import trampoline


def failing():
    raise ValueError("deep")
    yield


def answer():
    return 42
    yield


def test_an_exception_reaches_the_caller():
    def caller():
        return (yield failing())

    with pytest.raises(ValueError, match="deep"):
        trampoline(caller())


def test_a_caught_exception_is_not_thrown_again():
    def recovering():
        try:
            yield failing()
        except ValueError:
            pass
        return (yield answer()) + 1

    assert trampoline(recovering()) == 43
