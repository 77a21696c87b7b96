"""The `adc` command: its outputs and exit codes, run as a user runs it (a subprocess)."""
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.command_line import KERNELS, adc_cmd


def test_info_lists_kernels(kernels_so):
    result = adc_cmd("info", str(kernels_so))
    assert result.returncode == 0, result.stderr
    assert "dense_relu(x: f32[B,I], w: f32[I,O], b: f32[O]) -> f32[B,O]" in result.stdout
    assert "logsumexp_rows(x: f64[B,N]) -> f64[B]" in result.stdout


def test_check_accepts_the_sample():
    result = adc_cmd("check", KERNELS)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_ir_prints_verified_ir_and_stages():
    ir = adc_cmd("ir", KERNELS)
    assert ir.returncode == 0 and "func @mlp_loss(%x: f32[B,I]" in ir.stdout
    after = adc_cmd("ir", KERNELS, "--print-after-all")
    for name in ("inline", "simplify", "cse", "dce"):
        assert f"IR after {name}" in after.stderr
    opt = adc_cmd("ir", KERNELS, "--emit", "opt")
    assert opt.returncode == 0 and " call " not in opt.stdout
    llvm = adc_cmd("ir", KERNELS, "--emit", "llvm")
    assert llvm.returncode == 0 and "define" in llvm.stdout and "adc_kernel_sigmoid_shift" in llvm.stdout
    asm = adc_cmd("ir", KERNELS, "--emit", "asm")
    assert asm.returncode == 0 and "adc_kernel_sigmoid_shift:" in asm.stdout


def test_ir_refuses_an_unknown_pass_to_print_after_without_a_traceback():
    result = adc_cmd("ir", KERNELS, "--print-after", "adjoint", "--print-after", "cse")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("adc ir: error: --print-after adjoint: no such pass; the passes: expand, ")


@pytest.mark.parametrize("args", [("--grad", "mlp_loss", "--emit", "asm"), ("--jvp", "mlp_loss", "--print-after-all"),
                                  ("--grad", "mlp_loss", "--jvp", "mlp_loss")])
def test_ir_refuses_options_that_would_be_ignored(args):
    result = adc_cmd("ir", KERNELS, *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr and "error:" in result.stderr


@pytest.mark.parametrize("source, where, words", [
    ("def f(x: f32[N]) -> f32[N]:\n    return x +\n", "2:", ["error:"]),
    ("def f(x: f32[N]) -> f32[N]:\n    return y\n", "2:12", ["unknown name", "'y'"]),
    ("def f(x: f32[N], y: f32[M]) -> f32[N]:\n    return x + y\n", "2:", ["broadcast"]),
])
def test_diagnostics_exit_1_without_traceback(tmp_path, source, where, words):
    bad = tmp_path / "bad.adc"
    bad.write_text(source)
    for command in ("check", "compile", "ir"):
        result = adc_cmd(command, str(bad), cwd=tmp_path)
        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        first = result.stderr.splitlines()[0]
        assert first.startswith(f"{bad}:{where}") and ": error: " in first
        assert "^" in result.stderr.splitlines()[2]
        for word in words:
            assert word in result.stderr


def test_compile_writes_a_loadable_shared_object(tmp_path):
    out = tmp_path / "k.so"
    result = adc_cmd("compile", KERNELS, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert adc_cmd("info", str(out)).returncode == 0


@pytest.mark.parametrize("args", [("check", "missing.adc"), ("info", "missing.so"), ("ir", "missing.adc"),
                                  ("compile", KERNELS, "-o", "k.so", "--header", "missing/k.h")])
def test_missing_files_are_errors_not_tracebacks(tmp_path, args):
    result = adc_cmd(*args, cwd=tmp_path)
    assert result.returncode == 1 and "missing" in result.stderr and "Traceback" not in result.stderr


def test_usage_error_exits_2():
    assert adc_cmd("frobnicate").returncode == 2


def test_a_reader_that_leaves_early_gets_no_error(kernels_so):
    """`adc info k.so | head -1`: the broken pipe is not reported as an error or a traceback."""
    result = subprocess.run(f"{sys.executable} -m adc info {kernels_so} | head -1", shell=True,
                            capture_output=True, text=True)
    assert result.stdout.count("\n") == 1 and result.stderr == ""


def test_version_is_defined_once_and_reported_everywhere():
    import importlib.metadata

    import adc
    from adc.abi import ADC_VERSION

    shown = subprocess.run([sys.executable, "-m", "adc", "--version"], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == f"adc {adc.__version__}"
    assert importlib.metadata.version("adc") == adc.__version__ == ADC_VERSION
    assert importlib.metadata.metadata("adc")["License-Expression"] == "Apache-2.0"
    assert (Path(adc.__file__).parent / "py.typed").is_file()


def adc_check(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "adc", "check", str(path)], capture_output=True, text=True)


def test_an_integer_literal_of_thousands_of_digits_is_a_located_error(tmp_path):
    """It was a lark VisitError traceback (Python's int-digits limit)."""
    path = tmp_path / "big.adc"
    path.write_text("def f(x: f32) -> f32:\n    return x + " + "9" * 5000 + "\n")
    result = adc_check(path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{path}:2:16: error: integer literal of 5000 digits: it fits no adc dtype" in result.stderr


def test_a_file_that_is_not_utf8_is_a_located_error(tmp_path):
    """It was a UnicodeDecodeError traceback."""
    path = tmp_path / "latin1.adc"
    path.write_bytes(b"def f(x: f32) -> f32:\n    return x  # caf\xe9\n")
    result = adc_check(path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{path}:2:20: error: the file is not UTF-8 text: byte 0xe9 cannot be decoded" in result.stderr


def test_the_column_of_a_bad_byte_counts_characters(tmp_path):
    """It counted bytes: after a ² the caret stood one column right of the bad byte."""
    import adc

    path = tmp_path / "bad.adc"
    path.write_bytes("def f(x: f32) -> f32:  # x²".encode() + b"\x80 \n    return x\n")
    with pytest.raises(adc.CompileError) as info:
        adc.compile_file(path)
    assert info.value.col == 28 and info.value.render().split("\n")[2] == " " * 27 + "^"


def test_a_lone_surrogate_in_source_text_is_a_located_error():
    """It was a UnicodeEncodeError from inside the compiler."""
    import adc

    with pytest.raises(adc.CompileError, match=r"<string>:2:17: error: the source is not valid Unicode: "
                                               r"lone surrogate U\+DC80"):
        adc.compile("def f(x: f32) -> f32:\n    return x  # \udc80\n")


@pytest.mark.parametrize("command", ["check", "compile"])
def test_an_empty_program_is_reported(tmp_path, command):
    """It compiled with status 0 and no word."""
    path = tmp_path / "empty.adc"
    path.write_text("# nothing here yet\n")
    args = [str(path)] + (["-o", str(tmp_path / "empty.so")] if command == "compile" else [])
    result = subprocess.run([sys.executable, "-m", "adc", command, *args], capture_output=True, text=True)
    assert result.returncode == 0 and f"{path}: warning: the program defines no kernels" in result.stderr
