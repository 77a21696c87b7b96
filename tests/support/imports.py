"""What a Python file imports, read from its syntax tree without running it: the layering tests'
view of adc's package and of the tests themselves.

    from adc import driver                 ->  imports_of: "adc.driver"
    from .test_lower import call           ->  imported_modules: "tests.codegen.test_lower", "...test_lower.call"
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator


def imports_of(path: Path) -> Iterator[str]:
    """The modules `path` imports by absolute name, function-local imports included."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "adc":     # `from adc import driver` imports adc.driver
                yield from (f"adc.{alias.name}" for alias in node.names)
            else:
                yield node.module


def imported_modules(path: Path, root: Path) -> Iterator[str]:
    """Every module `path` (a file under `root`, the folder holding its top package) may import,
    relative imports resolved: for `from m import n`, both m and m.n, since n may be a submodule."""
    package = path.relative_to(root).parent.parts
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else ()
            module = ".".join((*base, *([node.module] if node.module else [])))
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)
