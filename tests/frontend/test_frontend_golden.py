"""Golden IR: each .adc under golden/ (and the sample kernels) prints exactly its .ir file.

Regenerate with ADC_UPDATE_GOLDEN=1 and review the diff.
"""
import os
from pathlib import Path

import pytest

from adc.frontend import compile_source
from adc.ir.parser import parse_module
from adc.ir.printer import format_module
from adc.ir.verify import verify
from tests.support.repository import SAMPLES

GOLDEN = Path(__file__).parent / "golden"
SAMPLE = SAMPLES / "kernels.adc"
SOURCES = sorted(GOLDEN.glob("*.adc")) + [SAMPLE]


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_printed_ir_matches_golden(path):
    module = compile_source(path.read_text(), path.name)
    verify(module, require_locations=True)
    text = format_module(module)
    expected = GOLDEN / f"{path.stem}.ir"
    if os.environ.get("ADC_UPDATE_GOLDEN") == "1":
        expected.write_text(text)
    assert text == expected.read_text()
    assert format_module(parse_module(text, path.name)) == text


def test_golden_sources_say_what_they_prove():
    for path in GOLDEN.glob("*.adc"):
        assert path.read_text().startswith("# Proves "), path.name
