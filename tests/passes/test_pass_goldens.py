"""Golden tests: each tests/passes/<pass>/<case>.ir, run through that one pass, prints as <case>.after.ir.

Each input starts with a `//` line saying what the case proves; the expected file
repeats it. Set ADC_UPDATE_GOLDEN=1 to rewrite the expected files, then review the diff.
"""
import os
from pathlib import Path

import pytest

from adc.ir.parser import parse_module
from adc.ir.printer import format_module
from adc.ir.verify import verify
from adc.passes.pipeline import DEFAULT_PIPELINE

HERE = Path(__file__).parent
PASSES = {p.name: p.function for p in DEFAULT_PIPELINE}
CASES = sorted(p for name in PASSES for p in (HERE / name).glob("*.ir") if not p.name.endswith(".after.ir"))


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_golden(path):
    text = path.read_text()
    comment = text.splitlines()[0]
    assert comment.startswith("// "), f"{path} must start with a // line saying what it proves"
    before = parse_module(text, path.name)
    verify(before)
    after = PASSES[path.parent.name](before)
    verify(after, pass_name=path.parent.name)
    got = f"{comment}\n{format_module(after)}"
    expected_path = path.with_suffix(".after.ir")
    if os.environ.get("ADC_UPDATE_GOLDEN") == "1":
        expected_path.write_text(got)
    assert got == expected_path.read_text()
    assert format_module(parse_module(got)) == format_module(after)


def test_every_pass_has_golden_cases():
    assert {p.parent.name for p in CASES} == set(PASSES)
