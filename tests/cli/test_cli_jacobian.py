"""`adc ir FILE --jacobian KERNEL`: the Jacobian function of one kernel (identity seeds through the batched
VJP), parseable and verified, and a clear error for an unknown kernel; `--batch-jacobian KERNEL` alike."""
import pytest

from adc.ir.parser import parse_module
from adc.ir.verify import verify
from tests.support.command_line import KERNELS, adc_cmd


def test_jacobian_prints_the_jacobian_function():
    result = adc_cmd("ir", KERNELS, "--jacobian", "dense_relu")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("func @dense_relu_jacobian(%x: f32[B,I], %w: f32[I,O], %b: f32[O])"
                                    " -> (f32[B,O,B,I], f32[B,O,I,O], f32[B,O,O])")
    assert "iota" in result.stdout and "matmul" in result.stdout and "call" not in result.stdout
    verify(parse_module(result.stdout))


def test_jacobian_of_an_unknown_kernel_exits_1_without_traceback():
    result = adc_cmd("ir", KERNELS, "--jacobian", "nope")
    assert result.returncode == 1 and result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: no function @nope to differentiate") and "dense_relu" in result.stderr


@pytest.mark.parametrize("flag, name, source, message", [
    ("--jacobian", "two", "def two(x: f32[N]) -> (f32[N], f32[N]):\n    return x, x * x\n",
     "two.adc:1:1: error: the Jacobian of @two needs a single float result, it returns"),
    ("--batch-jacobian", "mixing", "def mixing(x: f32[B, I]) -> f32[B, I]:\n    return x - mean(x, axis=0)\n",
     "mixing.adc:2:16: error: the batch Jacobian of @mixing: result[i] must depend on 'x'[i] only, "
     "but examples mix here (reduce_sum)"),
])
def test_a_kernel_without_the_jacobian_asked_for_is_a_located_error(tmp_path, flag, name, source, message):
    path = tmp_path / f"{name}.adc"
    path.write_text(source)
    result = adc_cmd("ir", str(path), flag, name)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert message in result.stderr


def test_batch_jacobian_prints_the_batch_jacobian_function():
    result = adc_cmd("ir", KERNELS, "--batch-jacobian", "dense_relu")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("func @dense_relu_batch_jacobian(%x: f32[B,I], %w: f32[I,O], %b: f32[O])"
                                    " -> f32[B,O,I]")
    assert result.stdout.count("matmul") == 1       # the primal x @ w: the seeds fold into a broadcast of w
    verify(parse_module(result.stdout))
