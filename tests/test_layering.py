"""The dependency direction of the design: a test scans every import of the package.

Layers, bottom up: adc.errors, adc.version, adc.cpus, adc.locks and adc.compile_log import nothing of adc;
adc.ir imports only adc.errors; adc.abi (the compiled-module ABI) builds on adc.ir;
passes and the frontend on the IR; codegen on the IR and the ABI; the compiler
(adc.compiler: the pipeline) on all of those; adc.compile_worker (where a kernel is
compiled: this process or a worker process) on the compiler; the driver (cache, JIT loading, `.so`
linking) on codegen and the compiler — never on the runtime; the runtime on the ABI
and, for derivatives, on the driver and the passes' analyses — never on codegen,
so loading a `.so` needs no llvmlite. adc.dask (kernels over Dask arrays) sits on the runtime.
The CLI and `adc/__init__` sit on top.
Every import counts, function-local ones included, and no two layers import each other.
"""
import ast
from pathlib import Path

from tests.support.imports import imports_of
from tests.support.repository import ROOT

PACKAGE = ROOT / "adc"

LEAVES = ("adc.errors",)
ALLOWED = {
    "adc.errors": (),
    "adc.cpus": (),
    "adc.compile_log": (),
    "adc.locks": (),
    "adc.version": (),
    "adc.ir": ("adc.ir", "adc.errors"),
    "adc.abi": ("adc.ir", "adc.errors", "adc.version"),
    "adc.passes": ("adc.ir", "adc.errors", "adc.passes"),
    "adc.frontend": ("adc.ir", "adc.errors", "adc.frontend"),
    "adc.codegen": ("adc.ir", "adc.errors", "adc.codegen", "adc.abi", "adc.cpus", "adc.compile_log", "adc.locks"),
    "adc.compiler": ("adc.ir", "adc.errors", "adc.abi", "adc.passes", "adc.frontend", "adc.codegen",
                     "adc.compile_log"),
    "adc.compile_worker": ("adc.abi", "adc.codegen", "adc.compiler", "adc.locks"),
    "adc.driver": ("adc.driver", "adc.ir", "adc.errors", "adc.abi", "adc.codegen", "adc.compiler", "adc.compile_log",
                   "adc.cpus", "adc.compile_worker", "adc.locks"),
    "adc.runtime": ("adc.runtime", "adc.ir", "adc.errors", "adc.abi", "adc.cpus", "adc.locks", "adc.driver",
                    "adc.passes.example_axis", "adc.passes.expand", "adc.passes.inline"),
    "adc.dask": ("adc.runtime", "adc.ir"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str | None:
    return next((name for name in sorted(ALLOWED, key=len, reverse=True)
                 if module == name or module.startswith(name + ".")), None)


def adc_imports():
    for path in PACKAGE.rglob("*.py"):
        module = module_name(path)
        for imported in imports_of(path):
            if imported.startswith("adc."):
                yield module, imported


def test_layers_import_only_what_they_may():
    broken = []
    for module, imported in adc_imports():
        layer = layer_of(module)
        if layer is not None and not any(imported == ok or imported.startswith(ok + ".") for ok in ALLOWED[layer]):
            broken.append(f"{module} imports {imported}")
    assert not broken, "\n".join(broken)


def test_no_two_layers_import_each_other():
    edges = {(layer_of(m), layer_of(i)) for m, i in adc_imports()}
    edges = {(a, b) for a, b in edges if a and b and a != b}
    assert not {(a, b) for a, b in edges if (b, a) in edges}


def test_the_runtime_never_imports_codegen_and_the_driver_never_the_runtime():
    forbidden = [(m, i) for m, i in adc_imports()
                 if (layer_of(m) == "adc.runtime" and i.startswith("adc.codegen"))
                 or (layer_of(m) in ("adc.driver", "adc.compiler", "adc.codegen") and i.startswith("adc.runtime"))]
    assert not forbidden


def test_no_module_imports_another_modules_private_names():
    """A leading underscore marks what a module keeps to itself (the tape's recorded calls and its
    bookkeeping, a kernel's call plan): other modules go through its public names."""
    private = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("adc"):
                names = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                private += [f"{module_name(path)} imports {node.module}.{name}" for name in names]
    assert not private, "\n".join(private)


def test_the_jacobians_use_only_the_tapes_public_methods():
    """jacobians.py takes the recorded calls with tape.take_nodes and walks them with backward.walk,
    never touching the tape's private attributes."""
    tree = ast.parse((PACKAGE / "runtime" / "jacobians.py").read_text())
    touched = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
               and isinstance(node.value, ast.Name) and node.value.id == "tape" and node.attr.startswith("_")}
    assert not touched, touched
