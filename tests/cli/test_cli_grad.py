"""`adc ir FILE --grad KERNEL` and `--jvp KERNEL`: the cleaned VJP or JVP function of one kernel, and a clear
error for an unknown one."""
from adc.ir.parser import parse_module
from adc.ir.verify import verify
from tests.support.command_line import KERNELS, adc_cmd


def test_grad_prints_the_vjp_function():
    result = adc_cmd("ir", KERNELS, "--grad", "dense_relu")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("func @dense_relu_vjp(%x: f32[B,I], %w: f32[I,O], %b: f32[O], %ct: f32[B,O])"
                                    " -> (f32[B,I], f32[I,O], f32[O])")
    assert "select" in result.stdout and "matmul" in result.stdout
    verify(parse_module(result.stdout))


def test_grad_of_an_unknown_kernel_exits_1_without_traceback():
    result = adc_cmd("ir", KERNELS, "--grad", "nope")
    assert result.returncode == 1 and result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: no function @nope to differentiate") and "dense_relu" in result.stderr


def test_jvp_prints_the_forward_mode_function():
    result = adc_cmd("ir", KERNELS, "--jvp", "dense_relu")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("func @dense_relu_jvp(%x: f32[B,I], %w: f32[I,O], %b: f32[O], %dx: f32[B,I], "
                                    "%dw: f32[I,O], %db: f32[O]) -> (f32[B,O], f32[B,O])")
    verify(parse_module(result.stdout))


def test_jvp_of_an_unknown_kernel_exits_1_without_traceback():
    result = adc_cmd("ir", KERNELS, "--jvp", "nope")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: no function @nope to differentiate")
