"""The dependency direction of the design: a test scans every import of the package.

Layers, bottom up: adc.errors, adc.version, adc.cpus, adc.locks and adc.compile_log import nothing of adc;
adc.ir imports only adc.errors; adc.abi (the compiled-module ABI) builds on adc.ir;
passes and the frontend on the IR; codegen on the IR and the ABI; the compiler
(adc.compiler: the pipeline) on all of those; adc.compile_worker (where a kernel is
compiled: this process or a worker process) on the compiler; the driver (cache, JIT loading, `.so`
linking) on codegen and the compiler — never on the runtime; the runtime on the ABI
and, for derivatives, on the driver and the passes' analyses — never on codegen,
so loading a `.so` needs no llvmlite. adc.dask (kernels over Dask arrays), the framework bridges adc.torch and
adc.jax, adc.jax_ffi (adc.jax's XLA FFI handler, built by the C compiler aot.py finds and kept in the
compile cache), adc.python_kernels
(@adc.kernel, whose types adc.annotations defines, importing nothing of adc) and adc.notebook (the
%%adc magic) sit on the runtime;
adc.build_ahead (the runtime library built by a child of `import adc`) on the cache and the driver.
The CLI and `adc/__init__` sit on top.
Every import counts, function-local ones included, and no two layers import each other.
Below the layers, import circles between modules are tested too: none in adc.runtime, none that
crosses a folder, and inside a folder only the engines that apply their own rules (ALLOWED_CIRCLES).
"""
import ast
from pathlib import Path

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
                    "adc.passes.example_axis", "adc.passes.expand", "adc.passes.inline", "adc.passes.sparsity"),
    "adc.dask": ("adc.runtime", "adc.ir"),
    "adc.annotations": (),
    "adc.python_kernels": ("adc.runtime", "adc.errors", "adc.annotations", "adc.locks"),
    "adc.notebook": ("adc.runtime", "adc.errors"),
    "adc.build_ahead": ("adc.abi", "adc.codegen.toolchain.cache", "adc.driver.runtime_library"),
    "adc.torch": ("adc.runtime",),
    "adc.jax": ("adc.runtime", "adc.jax_ffi"),
    "adc.jax_ffi": ("adc.runtime", "adc.errors", "adc.locks", "adc.codegen.toolchain.aot", "adc.driver.cache_keys"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}
EXTENSIONS = {module_name(path) for path in PACKAGE.rglob("*.c")}     # C sources: setup.py builds native_call.c


def imports_of(path: Path):
    """The modules `path` imports, anywhere in it (function-local and TYPE_CHECKING imports too):
    `from adc.runtime import ops` and `from . import ops` name adc.runtime.ops, `from
    adc.runtime.ops import add` names adc.runtime.ops. Only the module named counts, not the
    packages above it whose __init__ runs first (adc/__init__ imports the whole public API)."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module
            for alias in node.names:
                named = f"{base}.{alias.name}"
                yield named if named in MODULES or named in EXTENSIONS else base


def layer_of(module: str) -> str | None:
    return next((name for name in sorted(ALLOWED, key=len, reverse=True)
                 if module == name or module.startswith(name + ".")), None)


def adc_imports():
    for module, path in MODULES.items():
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


# The import circles allowed, each inside one folder: an engine whose rules apply the engine again
# (a loop's rule differentiates or batches its body with the pass itself). Nothing else may
# import in a circle, and no circle may cross a folder.
# A name ending in ".*" stands for a package's modules (its rule families).
ALLOWED_CIRCLES = {
    frozenset({"adc.passes.adjoint", "adc.passes.adjoint_rules", "adc.passes.adjoint_rules.*",
               "adc.passes.adjoint_control_flow", "adc.passes.split_vjp"}):
        "the adjoint pass and its rules: a loop's or branch's rule differentiates its body with the pass, "
        "and a loop's splits its body's VJP (split_vjp cuts the pass's result in two)",
    frozenset({"adc.passes.batch", "adc.passes.batch_rules"}):
        "the batching pass and its rules: a call's, loop's or branch's rule batches its callee or body with the pass",
    frozenset({"adc.passes.jvp", "adc.passes.tangent_rules"}):
        "the JVP pass and its rules: a loop's or branch's rule pushes tangents through its body with the pass",
    frozenset({"adc.frontend.elaborate", "adc.frontend.control_flow", "adc.frontend.custom_gradient"}):
        "the elaborator and its statement rules for loops, branches and custom gradients, which elaborate "
        "their bodies with it",
    frozenset({"adc.codegen.lowering.emitter", "adc.codegen.lowering.bounds", "adc.codegen.lowering.temporaries",
               "adc.codegen.lowering.fast_then_exact", "adc.codegen.lowering.rules.*"}):
        "lowering's Emitter and its rule table: the emitter computes an operand's element by its producer's "
        "rule, the rules (and the bounds checks and block layout they use) take the Emitter",
}


def _allowed(module: str, allowed: frozenset[str]) -> bool:
    return module in allowed or any(name.endswith(".*") and module.startswith(name[:-1]) for name in allowed)


def _one_tree(folders: set[Path]) -> bool:
    """The folders are one folder and folders inside it (an engine's package and its rules' subpackage)."""
    root = min(folders, key=lambda f: len(f.parts))
    return all(f == root or root in f.parents for f in folders)


def import_graph(modules) -> dict[str, set[str]]:
    """Module -> the modules of `modules` it imports (itself excluded)."""
    return {m: {i for i in imports_of(MODULES[m]) if i in modules and i != m} for m in modules}


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while not component or v not in component:
                component.add(stack.pop())
            on_stack.difference_update(component)
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def shown(component: set[str], graph: dict[str, set[str]]) -> str:
    return "\n".join(f"  {m} imports {', '.join(sorted(graph[m] & component))}" for m in sorted(component))


def test_the_runtime_imports_in_no_circle():
    """adc.runtime's modules stand in layers (docs/architecture.md): the recording protocol under
    Kernel, the differentiation API above the eager ops. A function-local import counts: one that
    closes a circle only hides it."""
    graph = import_graph([m for m in MODULES if m == "adc.runtime" or m.startswith("adc.runtime.")])
    found = circles(graph)
    assert not found, "\n".join(f"an import circle of {len(c)} modules:\n{shown(c, graph)}" for c in found)


def test_no_import_circle_crosses_a_folder_and_those_inside_one_are_allowed():
    graph = import_graph(MODULES)
    wrong = []
    for component in circles(graph):
        folders = {MODULES[m].parent for m in component}
        if not _one_tree(folders):
            wrong.append(f"a circle across {', '.join(sorted(str(f.relative_to(PACKAGE.parent)) for f in folders))}:")
        elif not any(all(_allowed(m, allowed) for m in component) for allowed in ALLOWED_CIRCLES):
            wrong.append("a circle not in ALLOWED_CIRCLES:")
        else:
            continue
        wrong.append(shown(component, graph))
    assert not wrong, "\n".join(wrong)


def test_derivatives_are_kept_by_what_they_are_built_from():
    """A kernel's derivatives live in its DerivativeCache (adc/runtime/derivative_cache.py), not in
    side tables of other modules keyed on kernels or their libraries."""
    tables = [f"{module} line {node.lineno}" for module, path in MODULES.items() if module.startswith("adc.runtime.")
              for node in ast.walk(ast.parse(path.read_text()))
              if isinstance(node, ast.Attribute) and node.attr == "WeakKeyDictionary"
              or isinstance(node, ast.Name) and node.id == "WeakKeyDictionary"]
    assert not tables, "\n".join(tables)
