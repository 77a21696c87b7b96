"""Timing and reporting shared by the benchmarks: medians of repeated calls, ratios printed side by side."""
from __future__ import annotations

import importlib
import statistics
import time


def timed(fn, *, min_time=0.25, repeats=7) -> float:
    """Median seconds per call over `repeats` batches of calls lasting >= min_time / repeats."""
    fn()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_time / repeats or calls < 1:
        fn()
        calls += 1
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


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
