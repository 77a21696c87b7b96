"""The tests' own layering: a test module imports no other test module (nor a conftest); what two
test modules share lives in tests/support/, so running, moving or deleting one test file never
changes what another one sees."""
from pathlib import Path

from tests.support.imports import imported_modules
from tests.support.repository import ROOT

TESTS = ROOT / "tests"


def is_test_module(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "tests" and (parts[-1].startswith("test_") or parts[-1] == "conftest")


def imported_test_modules(path: Path, root: Path) -> set[str]:
    """The test modules and conftests `path` imports from, or imports."""
    return {m for m in imported_modules(path, root) if is_test_module(m)}


def test_no_test_module_imports_another():
    crossings = [f"{path.relative_to(ROOT)} imports {module}"
                 for path in sorted(TESTS.rglob("*.py")) for module in sorted(imported_test_modules(path, ROOT))]
    assert not crossings, "move what they share into tests/support/:\n" + "\n".join(crossings)


def test_the_scan_sees_every_form_of_import(tmp_path):
    test_file = tmp_path / "tests" / "codegen" / "test_new.py"
    test_file.parent.mkdir(parents=True)
    test_file.write_text("from tests.codegen.test_lower import call\nfrom .test_jit import x\n"
                         "from . import test_aot\nimport tests.cli.test_cli\nfrom ..conftest import SAMPLES\n"
                         "from tests.support.native import call\nfrom .llvm_harness import compile_loop\n")
    assert imported_test_modules(test_file, tmp_path) == {
        "tests.codegen.test_lower", "tests.codegen.test_jit", "tests.codegen.test_aot", "tests.cli.test_cli",
        "tests.conftest"}
