"""Compile-stage lines: `ADC_LOG=compile` (or `adc compile -v`) prints one line per stage with its time.

    adc: kernels.adc: elaborate 41.2 ms
    adc: kernels.adc: cache miss 3f9c0a51e2d7
    adc: kernels.adc: llvm-optimize 180.4 ms
    adc: kernels.adc: codegen 95.1 ms

so a slow compile explains itself. The lines go through the standard `logging`
logger "adc.compile" at INFO; the environment switch only attaches a handler
writing to stderr, and programs may attach their own instead. adc does not
import `logging` itself (~5 ms at every start) until it is enabled: before a
program has imported it, no handler can be listening.
"""
from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Iterator

LOGGER_NAME = "adc.compile"
INFO = 20           # logging.INFO


def _logger():
    """The logger, or None while nothing has imported `logging` (see the module docstring)."""
    logging = sys.modules.get("logging")
    return logging.getLogger(LOGGER_NAME) if logging else None


def enable(stream=None) -> None:
    """Print the stage lines to `stream` (default stderr); once per process."""
    import logging

    logger = logging.getLogger(LOGGER_NAME)
    if not any(getattr(h, "adc_compile_log", False) for h in logger.handlers):
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.setFormatter(logging.Formatter("adc: %(message)s"))
        handler.adc_compile_log = True
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def enable_from_environment(environ=os.environ) -> None:
    """ADC_LOG is a comma-separated list of what to log; `compile` turns these lines on."""
    if "compile" in (part.strip() for part in environ.get("ADC_LOG", "").split(",")):
        enable()


def event(subject: str, message: str) -> None:
    logger = _logger()
    if logger is not None:
        logger.info("%s: %s", subject, message)


@contextmanager
def stage(subject: str, name: str) -> Iterator[None]:
    """Log how long the `with` block took, as stage `name` of compiling `subject`."""
    logger = _logger()
    if logger is None or not logger.isEnabledFor(INFO):
        yield
        return
    start = time.perf_counter()
    yield
    logger.info("%s: %s %.1f ms", subject, name, (time.perf_counter() - start) * 1e3)
