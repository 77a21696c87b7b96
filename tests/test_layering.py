"""The dependency direction of the design: a test scans every import of the package.

adc.ir imports nothing else of adc (but adc.errors); passes never import codegen or
runtime; the frontend never imports the runtime; codegen imports only adc.ir (and
adc.errors). The CLI, the driver and the runtime orchestrate.
"""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "adc"

ALLOWED = {
    "adc.ir": ("adc.ir", "adc.errors"),
    "adc.passes": ("adc.ir", "adc.errors", "adc.passes"),
    "adc.frontend": ("adc.ir", "adc.errors", "adc.frontend"),
    "adc.codegen": ("adc.ir", "adc.errors", "adc.codegen"),
}


def imports_of(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def test_layers_import_only_what_they_may():
    broken = []
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        layer = next((name for name in ALLOWED if module == name or module.startswith(name + ".")), None)
        if layer is None:
            continue
        for imported in imports_of(path):
            if imported == "adc" or imported.startswith("adc."):
                if not any(imported == ok or imported.startswith(ok + ".") for ok in ALLOWED[layer]):
                    broken.append(f"{module} imports {imported}")
    assert not broken, "\n".join(broken)
