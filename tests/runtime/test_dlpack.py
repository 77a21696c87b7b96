"""DLPack in and out: any CPU array exporting `__dlpack__` is a kernel argument, read without a copy;
an array on another device is refused naming the parameter; a Tensor exports its memory."""
import numpy as np
import pytest

import adc
from adc.runtime.dlpack import from_dlpack

SOURCE = "def shift(x: f32[N], delta: f32) -> f32[N]:\n    return x + delta\n"


class Exporter:
    """A foreign array (as a PyTorch or JAX CPU array is to adc): only the DLPack protocol, no
    __array__, over a NumPy buffer it owns; `device` says where it claims to live."""

    def __init__(self, array: np.ndarray, device: tuple[int, int] = (1, 0)):
        self.array, self.device, self.exports = array, device, 0

    def __dlpack__(self, **kwargs):
        self.exports += 1
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.device


class Refuses(Exporter):
    def __dlpack__(self, **kwargs):
        raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")


@pytest.fixture(scope="module")
def shift():
    return adc.compile(SOURCE, "dlpack.adc").shift


def test_a_dlpack_array_is_a_kernel_argument(shift):
    x = Exporter(np.arange(5, dtype=np.float32))
    np.testing.assert_array_equal(shift(x, 0.5).numpy(), np.arange(5, dtype=np.float32) + 0.5)
    assert x.exports == 1


def test_the_argument_is_read_where_it_lies():
    buffer = np.arange(6, dtype=np.float32)
    view = from_dlpack(Exporter(buffer), "shift: parameter 'x'")
    assert np.shares_memory(view, buffer)


def test_a_strided_dlpack_array_is_read_as_its_elements(shift):
    x = Exporter(np.arange(10, dtype=np.float32)[::2])
    np.testing.assert_array_equal(shift(x, 1.0).numpy(), np.arange(10, dtype=np.float32)[::2] + 1)


def test_a_dlpack_array_of_the_wrong_dtype_is_refused_as_an_array_would_be(shift):
    with pytest.raises(TypeError, match="parameter 'x' expects dtype f32 .* got float64"):
        shift(Exporter(np.arange(3.0)), 0.5)


def test_an_array_on_another_device_is_refused_naming_the_parameter(shift):
    with pytest.raises(TypeError, match=r"shift: parameter 'x' is on a CUDA device \(0\); adc kernels run on the CPU"):
        shift(Exporter(np.arange(3, dtype=np.float32), device=(2, 0)), 0.5)


def test_an_export_the_producer_refuses_names_the_parameter(shift):
    with pytest.raises(TypeError, match="shift: parameter 'x': its DLPack export failed: .*require gradient"):
        shift(Refuses(np.arange(3, dtype=np.float32)), 0.5)


def test_a_tensor_exports_its_memory_read_only(shift):
    y = shift(np.arange(4, dtype=np.float32), 1.0)
    assert y.__dlpack_device__() == (1, 0)
    out = np.from_dlpack(y)
    assert np.shares_memory(out, y.numpy()) and not out.flags.writeable
    np.testing.assert_array_equal(out, np.arange(4, dtype=np.float32) + 1)


def test_a_tensor_goes_back_into_a_kernel_through_dlpack(shift):
    y = shift(np.arange(4, dtype=np.float32), 1.0)
    np.testing.assert_array_equal(shift(Exporter(np.from_dlpack(y)), 1.0).numpy(), np.arange(4) + 2.0)
