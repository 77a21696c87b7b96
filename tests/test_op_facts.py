"""Every fact about an op lives in its record (adc/ir/ops/): a test scans the package's source.

An engine that kept its own list of op names would drift from the records silently: a new op
missing from the list is handled as if it were some other kind of op. So outside adc/ir/ops/ no
module-level statement may spell two or more op names in a collection (a tuple, list or set of
names, a dict of names to facts, a loop over names); tables keyed by op whose values are rules
(functions) are the engines' own and are allowed. Rooms stay small enough to read: no source
file over 600 lines.
"""
import ast
from pathlib import Path

from adc.ir.ops import OPS

PACKAGE = Path(__file__).resolve().parent.parent / "adc"
MAX_LINES = 600
# Collections that hold op names by coincidence, with why they are not op facts.
NOT_OP_FACTS = {
    ("adc/__init__.py", "__all__"): "the package's public Python names (adc.add, adc.abs, ...)",
    ("adc/frontend/python_habits.py", "RENAMED"): "other libraries' spellings (TensorFlow's reduce_sum, "
                                                 "gather) mapped to adc's builtins",
}


def _op_names(elements) -> list[str]:
    return [e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in OPS]


def _is_rule(value: ast.expr) -> bool:
    """A dict value that is code (a function, a lambda, a call making one), not a fact."""
    return isinstance(value, (ast.Name, ast.Attribute, ast.Lambda, ast.Call))


def _collections_of_op_names(statement: ast.stmt):
    """The collection literals of `statement` (outside function and class bodies) that spell two
    or more op names as elements or as keys of facts."""
    pending = [statement]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(_op_names(node.elts)) >= 2:
            yield node, _op_names(node.elts)
        if isinstance(node, ast.Dict):
            facts = [k for k, v in zip(node.keys, node.values) if not _is_rule(v)]
            if len(_op_names(facts)) >= 2:
                yield node, _op_names(facts)
        pending.extend(ast.iter_child_nodes(node))


def _target(statement: ast.stmt) -> str:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        return ast.unparse(statement.targets[0])
    if isinstance(statement, ast.AnnAssign):
        return ast.unparse(statement.target)
    return ""


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE.parent).as_posix(), path


def test_no_module_level_collection_of_op_names_outside_the_op_records():
    found = []
    for relative, path in _sources():
        if relative.startswith("adc/ir/ops/"):
            continue
        for statement in ast.parse(path.read_text()).body:
            if (relative, _target(statement)) in NOT_OP_FACTS:
                continue
            found += [f"{relative}:{node.lineno}: {names}" for node, names in _collections_of_op_names(statement)]
    assert not found, "op names listed outside adc/ir/ops (make them facts of the records):\n" + "\n".join(found)


def test_the_scan_finds_the_collections_it_forbids():
    flagged = ['LOOPS = {"for": 1, "while": 0}', 'FREE = frozenset({"constant", "dim"})',
               'for _name in ("exp", "log"):\n    pass', 'x = f(("sin", "cos"))']
    allowed = ['rules = {"exp": exp_rule, "log": log_rule}', 'ONE = frozenset({"reshape"})',
               'def f(op):\n    return op in ("exp", "log")', 'NAMES = ("relu", "softplus")']
    assert all(list(_collections_of_op_names(ast.parse(text).body[0])) for text in flagged)
    assert not any(list(_collections_of_op_names(ast.parse(text).body[0])) for text in allowed)


def test_no_source_file_is_over_600_lines():
    long = [f"{relative}: {n} lines" for relative, path in _sources()
            if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert not long, "\n".join(long)


def test_every_fact_names_what_exists():
    """Facts that name other things name real ones: a derivative is an op, a region attribute is
    one of the op's attributes, a linear operand exists, a scalar lowering is of an elementwise op."""
    for name, op in OPS.items():
        assert op.derivative is None or op.derivative in OPS, name
        assert set(op.regions) <= set(op.attrs), name
        assert (op.body_leads is not None) == ("body" in op.regions), name      # loops: their body's layout
        if op.arity is not None and isinstance(op.linear, tuple):
            assert all(0 <= k < op.arity for k in op.linear + op.products), name
        assert op.scalar is None or op.has("elementwise"), name
