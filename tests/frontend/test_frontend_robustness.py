"""Random garbage and mutated samples: the front end raises CompileError and nothing else."""
import random
from pathlib import Path

import pytest

from adc.errors import CompileError
from adc.frontend import compile_source

SAMPLE = (Path(__file__).resolve().parents[2] / "samples" / "kernels.adc").read_text()
ALPHABET = "abxyzNB0129.:,()[]+-*/@<=>#\n    _'\"\\!$"
SNIPPETS = ["x", "(", ")", "[", "]", ":", ",", "-1", "**", "@", "=", "\n", "    ", "axis=", "f64", "keepdims=True",
            "return ", "def ", "1e400", "10**10**10", "[:, ::2]", "x[5]", "N", "*B", "(f32, f32)"]


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(text) + 1)
        kind = rng.random()
        if kind < 0.4:
            text = text[:at] + text[at + rng.randint(1, 6):]
        elif kind < 0.7:
            text = text[:at] + rng.choice(ALPHABET) + text[at:]
        else:
            text = text[:at] + rng.choice(SNIPPETS) + text[at:]
    return text


def compiles_or_reports(source: str) -> None:
    try:
        compile_source(source, "fuzz.adc")
    except CompileError as err:
        assert err.loc is not None and err.loc.file == "fuzz.adc" and err.render()


@pytest.mark.parametrize("seed", range(8))
def test_mutated_sample_raises_only_compile_errors(seed):
    rng = random.Random(seed)
    for _ in range(150):
        compiles_or_reports(mutate(SAMPLE, rng))


def test_random_garbage_raises_only_compile_errors():
    rng = random.Random(1234)
    for _ in range(300):
        compiles_or_reports("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 80))))


def test_deep_parentheses_compile():
    source = "def f(x: f32) -> f32:\n    return -" + "(" * 3000 + "x" + ")" * 3000 + "\n"
    assert [op.name for op in compile_source(source)["f"].ops] == ["neg"]
