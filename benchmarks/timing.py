"""Timing and reporting shared by the benchmarks: medians of repeated calls, ratios printed side by side."""
from __future__ import annotations

import importlib
import statistics
import time
from typing import Callable, NamedTuple


def timed(fn, *, min_time=0.25, repeats=7) -> float:
    """Median seconds per call over `repeats` batches of calls lasting >= min_time / repeats."""
    return statistics.median(interleaved({"": Route(fn)}, min_time=min_time, repeats=repeats)[""])


class Route(NamedTuple):
    """One way to compute a cell's result, for `interleaved`: `call` is timed; `setup` runs before
    each of its batches (a thread count: routes at different counts share the rounds); before
    its batch the route also runs untimed for `settle` seconds, if any (at least one call)."""
    call: Callable[[], object]
    setup: Callable[[], object] = lambda: None
    settle: float = 0.0


def interleaved(routes: dict[str, Route], *, min_time=0.25, repeats=7,
                clock=time.perf_counter) -> dict[str, list[float]]:
    """Seconds per call of each route in each of `repeats` rounds. A round runs one batch of every
    route, the order rotating round by round, so the machine's drift (here 5-10% between minutes)
    moves all routes alike, where medians taken one route after another compare different
    moments. A batch lasts about min_time / repeats.

    The untimed run before a batch (`Route.settle`) keeps one route's threads from costing the
    next: OpenBLAS's workers spin ~0.1 s after a threaded call, and on two cores an adc product on
    two threads that starts meanwhile ran 2-2.5x slower (512^3 f64, Zen 4)."""
    calls = {name: _calls_per_batch(route, min_time / repeats, clock) for name, route in routes.items()}
    seconds: dict[str, list[float]] = {name: [] for name in routes}
    names = list(routes)
    for round_ in range(repeats):
        turn = round_ % len(names)
        for name in names[turn:] + names[:turn]:
            route = routes[name]
            route.setup()
            _run_for(route.call, route.settle, clock)
            start = clock()
            for _ in range(calls[name]):
                route.call()
            seconds[name].append((clock() - start) / calls[name])
    return seconds


def _calls_per_batch(route: Route, batch_time: float, clock) -> int:
    route.setup()
    route.call()
    calls, start = 0, clock()
    while clock() - start < batch_time or calls < 1:
        route.call()
        calls += 1
    return calls


def _run_for(call, seconds: float, clock) -> None:
    if seconds <= 0:
        return
    start = clock()
    call()
    while clock() - start < seconds:
        call()


def optional(name):
    try:
        return importlib.import_module(name)     # a submodule too: optional("scipy.linalg")
    except ImportError:
        return None


def report(title: str, adc_time: float | dict[str, float], others: dict[str, float], target: str) -> None:
    """`adc_time` may be adc's routes by name: each is printed, and the fastest is adc's figure."""
    routes = adc_time if isinstance(adc_time, dict) else {}
    adc_time = min(routes.values()) if routes else adc_time
    print(f"\n{title}\n  adc            {adc_time * 1e3:9.3f} ms")
    for name, t in routes.items():
        print(f"    adc {name:30s} {t * 1e3:9.3f} ms")
    for name, t in others.items():
        print(f"  {name:14s} {t * 1e3:9.3f} ms   {name}/adc = {t / adc_time:6.2f}x")
    print(f"  target: {target}")


def fastest(peer: str, routes: dict[str, float]) -> dict[str, float]:
    """A peer's fastest route, as {"peer route": seconds}, for `report`'s alternatives."""
    name = min(routes, key=routes.get)
    return {f"{peer} {name}": routes[name]}
