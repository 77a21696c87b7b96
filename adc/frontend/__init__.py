"""The front end: adc source text → AST (`parse_program`) → verified-shape IR (`elaborate`).

    module = compile_source("def sq(x: f32[N]) -> f32[N]:\\n    return x * x\\n", "sq.adc")

Every malformed program raises `adc.errors.CompileError` with its file, line and column.
"""
from __future__ import annotations

from adc.frontend.elaborate import elaborate
from adc.frontend.parse import parse_program
from adc.ir.core import Module

__all__ = ["compile_source", "elaborate", "parse_program"]


def compile_source(source: str, filename: str = "<string>") -> Module:
    """Parse and elaborate `source`; `filename` names it in locations and in `Module.name`."""
    return elaborate(parse_program(source, filename))
