"""samples/kernels.adc through the frontend: its IR round-trips, and the pipeline keeps its meaning."""
import numpy as np
import pytest

from adc.ir.interp import run
from adc.ir.parser import parse_module
from adc.ir.printer import format_module
from adc.passes.pipeline import run_pipeline
from tests.support import references
from tests.support.repository import SAMPLES

frontend = pytest.importorskip("adc.frontend")
SAMPLE = SAMPLES / "kernels.adc"


@pytest.fixture(scope="module")
def sample_ir():
    return frontend.compile_source(SAMPLE.read_text(), str(SAMPLE))


def test_sample_ir_round_trips(sample_ir):
    text = format_module(sample_ir)
    assert format_module(parse_module(text, "kernels.ir")) == text


def test_pipeline_preserves_sample_kernels(sample_ir):
    optimized = run_pipeline(sample_ir)
    for name, args in references.sample_inputs(np.random.default_rng(3)).items():
        before, after = run(sample_ir, name, *args), run(optimized, name, *args)
        for b, a in zip(before, after, strict=True):
            np.testing.assert_array_equal(a, b)
        expected = getattr(references, name)(*(np.asarray(a, np.float64) for a in args))
        np.testing.assert_allclose(after[0], expected, rtol=2e-5, atol=2e-5)
