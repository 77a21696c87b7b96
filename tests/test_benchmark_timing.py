"""benchmarks/timing.py's interleaved rounds, on a clock the test drives: every route runs one
batch a round, the order rotating; a route's setup comes before each of its batches and its
settling run before the batch is timed; the seconds per call are each batch's own."""
import importlib.util

import pytest

from tests.support.repository import ROOT


@pytest.fixture(scope="module")
def timing():
    spec = importlib.util.spec_from_file_location("benchmark_timing", ROOT / "benchmarks" / "timing.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Clock:
    """Time moves only when a route is called: by that route's cost."""

    def __init__(self):
        self.now = 0.0
        self.events: list[str] = []

    def __call__(self) -> float:
        return self.now

    def route(self, timing, name: str, cost: float, settle: float = 0.0):
        def call():
            self.now += cost
            self.events.append(name)
        return timing.Route(call, lambda: self.events.append(f"setup {name}"), settle)


def batches(events: list[str]) -> list[tuple[str, int]]:
    """The runs of calls between setups: (route, calls) in order."""
    runs = []
    for event in events:
        if event.startswith("setup "):
            runs.append([event[6:], 0])
        else:
            assert runs and runs[-1][0] == event, f"{event} called outside its own batch"
            runs[-1][1] += 1
    return [tuple(run) for run in runs]


def test_rounds_run_every_route_once_in_rotating_order(timing):
    clock = Clock()
    routes = {name: clock.route(timing, name, cost) for name, cost in (("a", 1), ("b", 2), ("c", 4))}
    seconds = timing.interleaved(routes, min_time=30, repeats=4, clock=clock)
    runs = batches(clock.events)
    calibration, rounds = runs[:3], runs[3:]
    assert [name for name, _ in calibration] == ["a", "b", "c"]
    assert [name for name, _ in rounds] == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]
    # a batch lasts at least min_time / repeats = 7.5 s: 8, 4 and 2 calls of 1, 2 and 4 s
    calls = {name: count for name, count in rounds}
    assert calls == {"a": 8, "b": 4, "c": 2}
    assert seconds == {"a": [1] * 4, "b": [2] * 4, "c": [4] * 4}


def test_a_settling_route_runs_untimed_before_each_batch(timing):
    clock = Clock()
    routes = {"quiet": clock.route(timing, "quiet", 1), "threads": clock.route(timing, "threads", 1, settle=5)}
    seconds = timing.interleaved(routes, min_time=6, repeats=2, clock=clock)
    rounds = batches(clock.events)[2:]
    # batches of 3 timed calls (3 s); "threads" first runs 5 more (5 s), untimed
    assert rounds == [("quiet", 3), ("threads", 8), ("threads", 8), ("quiet", 3)]
    assert seconds == {"quiet": [1, 1], "threads": [1, 1]}


def test_each_batch_is_timed_on_its_own(timing):
    clock = Clock()
    costs = iter([1] * 3 + [1, 1, 5, 5, 1, 1])     # calibration: a first call, then 2; then 3 rounds of 2

    def call():
        clock.now += next(costs)
    seconds = timing.interleaved({"x": timing.Route(call)}, min_time=6, repeats=3, clock=clock)
    assert seconds["x"] == [1, 5, 1]
