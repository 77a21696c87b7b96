"""The annotation objects of kernels in Python files: what each prints as (the adc type it stands
for), and the entries refused where Python evaluates them."""
import pytest

import adc
from adc import f32, f64, i32, i64
from adc.annotations import adc_type


def test_each_annotation_prints_as_its_adc_type():
    B, N = adc.dims("B N")
    assert [str(t) for t in (f32[B, N], f64["B, N"], i32["N-1", 3], i64, f32)] == \
        ["f32[B, N]", "f64[B, N]", "i32[N-1, 3]", "i64", "f32"]
    assert adc_type((f32[B], i64)) == "(f32[B], i64)"
    assert adc_type(int) is None and adc_type(()) is None


def test_dims_takes_names_separated_by_spaces_or_commas():
    assert [d.name for d in adc.dims("B, N  M")] == ["B", "N", "M"]
    assert adc.dims("T").name == "T"


@pytest.mark.parametrize("names, message", [("", "no names given"), ("B 2N", "'2N' is not a name")])
def test_dims_refuses_what_is_no_name(names, message):
    with pytest.raises(ValueError, match=message):
        adc.dims(names)


@pytest.mark.parametrize("entry", [1.5, -1, True, None])
def test_a_dimension_that_is_no_name_size_or_dim_is_refused(entry):
    with pytest.raises(TypeError, match=r"f32\[...\]: a dimension is a name or expression in a string"):
        f32[entry]
