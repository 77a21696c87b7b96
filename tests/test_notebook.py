"""The %%adc cell magic through IPython's InteractiveShell: kernels bound in the user namespace,
diagnostics printed as the CLI prints them (no traceback), @adc.kernel in an ordinary cell."""
import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell


@pytest.fixture
def shell():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "adc")
    yield shell
    InteractiveShell.clear_instance()


def test_a_cell_binds_its_kernels(shell):
    result = shell.run_cell("%%adc layers\n"
                            "def sigmoid_shift(x: f32[N], delta: f32) -> f32[N]:\n"
                            "    return sigmoid(x + delta)\n")
    assert result.success
    got = shell.user_ns["sigmoid_shift"](np.zeros(2, np.float32), 0.0).numpy()
    np.testing.assert_array_equal(got, [0.5, 0.5])
    assert shell.user_ns["layers"].kernels == ("sigmoid_shift",)


def test_an_error_is_reported_as_the_cli_does_and_binds_nothing(shell, capsys):
    result = shell.run_cell("%%adc\n"
                            "def f(x: f32[N]) -> f32[N]:\n"
                            "    return x + missing\n")
    captured = capsys.readouterr()
    assert result.success and "f" not in shell.user_ns
    lines = captured.err.splitlines()
    assert lines[0].endswith(">:2:16: error: unknown name 'missing'") and lines[0].startswith("<adc cell ")
    assert lines[1:] == ["    return x + missing", "               ^"]
    assert "Traceback" not in captured.out + captured.err


def test_a_module_name_must_be_a_name(shell, capsys):
    shell.run_cell("%%adc 2fast\ndef f(x: f32) -> f32:\n    return x\n")
    assert "takes the name to bind the module to, got '2fast'" in capsys.readouterr().err


def test_a_python_cell_defines_an_adc_kernel(shell):
    assert shell.run_cell("import adc\nfrom adc import f64\n\n@adc.kernel\n"
                          "def squared(x: f64[\"N\"]) -> f64[\"N\"]:\n    return x * x\n").success
    np.testing.assert_array_equal(shell.user_ns["squared"](np.arange(3.0)).numpy(), [0.0, 1.0, 4.0])
