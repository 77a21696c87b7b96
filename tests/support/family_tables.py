"""Rule tables gathered from one table per family: what a test checks so that no row is lost.

The builtins (adc/frontend/builtins/) and the VJP rules (adc/passes/adjoint_rules/) keep one
table per family of ops, merged in the package's `__init__`; a key defined by two families
would keep only the later row, silently.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections import Counter
from types import ModuleType


def lost_rows(package: ModuleType, name: str) -> list[str]:
    """The keys of the families' tables (attribute `name` of the package's modules) that two
    families define, or whose row the package's gathered table `name` does not hold."""
    families = [getattr(module, name) for module in _modules(package) if hasattr(module, name)]
    twice = [key for key, count in Counter(key for table in families for key in table).items() if count > 1]
    table = getattr(package, name)
    dropped = [key for family in families for key, row in family.items() if table.get(key) is not row]
    return sorted(set(twice + dropped))


def _modules(package: ModuleType) -> list[ModuleType]:
    return [importlib.import_module(f"{package.__name__}.{info.name}") for info in pkgutil.iter_modules(package.__path__)]
