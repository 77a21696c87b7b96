"""The guide's "Custom gradients" section, and "Custom gradients in SavedModel" as compile → load.

1. `@adc.custom_gradient` in Python: identity forward, the gradient clipped by norm on the way
   back — the gradient of clip_gradients(v * v) at v = 2 is 4 clipped to 2.0.
2. The same kernel written in the language (samples/custom_gradients.adc) is compiled by
   `adc compile` into a .so that carries its VJP kernel; a fresh process loads it and gets 2.0.
3. Compiled with `--no-gradients`, the .so is forward-only: differentiating it in a fresh
   process raises a LookupError naming the kernel and saying how to recompile.

    python samples/custom_gradients.py
"""
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import adc

HERE = Path(__file__).resolve().parent

LOADED = """
import adc
loaded = adc.load({so!r})
v = adc.Variable(2.0)
with adc.GradientTape() as t:
    output = loaded.clip_gradients(v * v)
try:
    print(t.gradient(output, v))
except LookupError as err:
    print(f"LookupError: {{err}}")
"""


@adc.custom_gradient
def clip_gradients(y):
    def backward(dy):
        return adc.clip_by_norm(dy, 0.5)
    return y, backward


def in_python() -> None:
    v = adc.Variable(2.0)
    with adc.GradientTape() as t:
        output = clip_gradients(v * v)
    print(t.gradient(output, v))   # calls backward, which clips 4 to 2


def compile_and_load_in_a_fresh_process(workdir: Path, so: str, *flags: str) -> None:
    subprocess.run([sys.executable, "-m", "adc", "compile", "custom_gradients.adc", "-o", so, *flags],
                   cwd=workdir, check=True)
    subprocess.run([sys.executable, "-c", LOADED.format(so=so)], cwd=workdir, check=True)


def main() -> None:
    in_python()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        shutil.copy(HERE / "custom_gradients.adc", workdir)
        compile_and_load_in_a_fresh_process(workdir, "custom_gradients.so")
        compile_and_load_in_a_fresh_process(workdir, "forward_only.so", "--no-gradients")


if __name__ == "__main__":
    main()
