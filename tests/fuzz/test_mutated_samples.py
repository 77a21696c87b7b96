"""Fuzzing adc with damaged copies of samples/*.adc: every outcome is a CompileError located in the
text, or kernels that agree with the reference interpreter (or refuse arguments a slice needs).

A sample takes one to three edits (tests/support/mutations.py): lines dropped, duplicated,
swapped or re-indented; tokens dropped, duplicated, swapped or replaced; a number, a
name or a dtype changed; characters inserted; the text cut. A file that is not UTF-8
is a located CompileError too. A damaged loop may not end (a while whose condition never fails, a
trip count grown by orders of magnitude), so the kernels of a damaged program with a loop are
compiled but not run. CI runs a fixed sample; a long run:

    ADC_FUZZ_EXAMPLES=2000 python -m pytest tests/fuzz -p no:cacheprovider
"""
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

import adc
from tests.fuzz.budget import fuzz_settings
from tests.fuzz.oracle import assert_located, check_against_interpreter, compile_or_locate
from tests.support.mutations import mutated
from tests.support.repository import SAMPLES

TEXTS = [path.read_text() for path in sorted(SAMPLES.glob("*.adc"))]
LOOP = re.compile(r"^\s*(for|while)\b", re.MULTILINE)


@fuzz_settings(60)
@given(source=st.sampled_from(TEXTS).flatmap(mutated))
def test_mutated_samples_raise_located_errors_or_run(source, outcomes):
    module = compile_or_locate(source, outcomes, "sample")
    if module is not None and not LOOP.search(source):
        check_against_interpreter(module, np.random.default_rng(len(source)), outcomes, "sample")


@fuzz_settings(20)
@given(text=st.sampled_from(TEXTS), at=st.integers(0, 10**4), byte=st.integers(0x80, 0xff))
def test_a_sample_file_that_is_not_utf8_is_located_at_its_first_bad_byte(text, at, byte):
    data = text.encode()
    at %= len(data) + 1
    data = data[:at] + bytes([byte]) + data[at:]
    bad = _first_undecodable(data)
    line_start = data.rfind(b"\n", 0, bad) + 1
    where = (data.count(b"\n", 0, bad) + 1, len(data[line_start:bad].decode()) + 1)    # the column in characters
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.adc"
        path.write_bytes(data)
        with pytest.raises(adc.CompileError) as info:
            adc.compile_file(path)
    assert (info.value.line, info.value.col) == where
    assert_located(info.value, data.decode("utf-8", "replace"), str(path))


def _first_undecodable(data: bytes) -> int:
    try:
        data.decode()
    except UnicodeDecodeError as err:
        return err.start
    raise AssertionError("the damaged text decodes")
