"""Every code block of README.md and docs/*.md runs, so the docs cannot drift from the code.

A block of adc source (typed parameters such as `x: f32[N]`) must elaborate without error.
A Python block runs in a fresh namespace after a prelude that defines the arrays its
fragments name; a line ending in a comment that starts with a literal
(`dy_dx = t1.gradient(y, x)   # 3.0`, `tape.jacobian(y, k).shape   # (7, 10, 5, 10): ...`)
asserts that value; a tuple stated for a tensor is its shape.
"""
import ast
import functools
import linecache
import re
from pathlib import Path

import numpy as np
import pytest

import adc
from adc.frontend import compile_source
from tests.support.repository import ROOT, SAMPLES

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
STATED_VALUES = {"README.md": 2, "autodiff.md": 15, "dask.md": 4, "interop.md": 12}     # commented results each document states
ADC_SOURCE = re.compile(r"^(@\w+.*\n)*(extern |def \w+\(\w+: [fib])", re.MULTILINE)


@functools.lru_cache(maxsize=None)
def layers():
    return adc.compile_file(SAMPLES / "layers.adc")


def prelude() -> dict:
    """The names the documents' fragments use without defining them."""
    rng = np.random.default_rng(0)
    f32 = np.float32
    return {"adc": adc, "np": np, "layers": layers(),
            "x": adc.constant(rng.standard_normal((7, 5), f32)),
            "w": rng.standard_normal((5, 10), f32), "b": rng.standard_normal(10, f32),
            "kernel": adc.Variable(rng.standard_normal((5, 10), f32)), "bias": adc.Variable(np.zeros(10, f32))}


def blocks(document: Path) -> list[str]:
    return BLOCK.findall(document.read_text())


def expected_value(line: str):
    """The literal a line's comment starts with, or None: `... # (7, 10): text` gives (7, 10)."""
    code, sep, comment = line.partition("#")
    if not sep or not code.strip():
        return None
    head = re.split(r":\s|\s—|\s[A-Za-z]", comment.strip(), maxsplit=1)[0]
    try:
        value = ast.literal_eval(head)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, (int, float, tuple)) else None


class _Checks(ast.NodeTransformer):
    """After each statement (at any depth) whose line states a value, a call asserting it."""

    def __init__(self, lines: list[str]):
        self.lines, self.count = lines, 0

    def generic_visit(self, node):
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if isinstance(statements, list) and statements and isinstance(statements[0], ast.stmt):
                setattr(node, field, [s for stmt in statements for s in self._checked(stmt)])
        return node

    def _checked(self, stmt: ast.stmt) -> list[ast.stmt]:
        line = self.lines[stmt.lineno - 1]
        want = expected_value(line) if stmt.lineno == stmt.end_lineno else None
        if want is None or not isinstance(stmt, (ast.Expr, ast.Assign)):
            return [stmt]
        self.count += 1
        if isinstance(stmt, ast.Expr):       # evaluate once: the check receives the value
            return [ast.Expr(_call("__check__", stmt.value, want, line))]
        return [stmt, ast.Expr(_call("__check__", stmt.targets[0], want, line))]


def _call(name: str, value: ast.expr, want, line: str) -> ast.Call:
    return ast.Call(ast.Name(name, ast.Load()), [_loaded(value), ast.Constant(want), ast.Constant(line)], [])


def _loaded(node: ast.expr) -> ast.expr:
    """An assignment target read back as a value."""
    return ast.Name(node.id, ast.Load()) if isinstance(node, ast.Name) else node


def check(got, want, line: str) -> None:
    if isinstance(want, tuple):      # a shape: the tensor's, or the tuple itself
        got = tuple(got.shape) if hasattr(got, "shape") else tuple(got)
        assert got == want, f"{line.strip()!r} gives {got}"
    else:
        assert float(got) == pytest.approx(want, rel=1e-6), f"{line.strip()!r} gives {got}"


def run_python(block: str, namespace: dict) -> int:
    """Execute the block with its stated values asserted; returns how many it checked. Its text is
    kept in linecache, as IPython keeps a cell's, so @adc.kernel reads the kernels it defines."""
    checks = _Checks(block.splitlines())
    tree = ast.fix_missing_locations(checks.visit(ast.parse(block)))
    namespace["__check__"] = check
    linecache.cache["<doc>"] = (len(block), None, block.splitlines(True), "<doc>")
    exec(compile(tree, "<doc>", "exec"), namespace)
    return checks.count


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_every_code_block_runs(document, monkeypatch):
    monkeypatch.chdir(ROOT)
    checked = 0
    for block in blocks(document):
        if ADC_SOURCE.match(block):
            compile_source(block, document.name)
        else:
            checked += run_python(block, prelude())
    assert checked == STATED_VALUES.get(document.name, 0)


def test_the_commented_values_are_checked():
    """The documents' stated results really are compared (a harness that checked nothing would pass)."""
    assert expected_value("dy_dx = t1.gradient(y, x)        # 3.0") == 3.0
    assert expected_value("t.gradient(output, v)            # 2.0: the gradient 4.0 clipped by norm") == 2.0
    assert expected_value("tape.jacobian(y, kernel).shape   # (7, 10, 5, 10): target.shape + source.shape") \
        == (7, 10, 5, 10)
    assert expected_value("m = adc.compile_file('k.adc')    # JIT in process") is None
    namespace = prelude()
    assert run_python("v = adc.Variable(2.0)\nv * 3.0    # 6.0\n", namespace) == 1
    with pytest.raises(AssertionError, match="gives"):
        run_python("v = adc.Variable(2.0)\nv * 3.0    # 7.0\n", namespace)
