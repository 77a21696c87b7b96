"""Deep nesting elaborates (random garbage and mutated samples are fuzzed in tests/fuzz/)."""
from adc.frontend import compile_source


def test_deep_parentheses_compile():
    source = "def f(x: f32) -> f32:\n    return -" + "(" * 3000 + "x" + ")" * 3000 + "\n"
    assert [op.name for op in compile_source(source)["f"].ops] == ["neg"]
