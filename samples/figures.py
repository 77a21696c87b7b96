"""Saving the guide's figures as PNG, when matplotlib (the optional extra [plot]) is installed.

The folder is the script's first argument, else $ADC_FIGURES, else the current directory.
Without matplotlib, `save` says so and the sample still prints its values.
"""
import os
import sys
from pathlib import Path


def save(name: str, draw) -> None:
    """Call draw(pyplot) and save the current figure as `name` in the figures folder."""
    try:
        import matplotlib
    except ImportError:
        print(f"figure {name}: skipped (matplotlib is not installed; pip install adc[plot])")
        return
    matplotlib.use("Agg")
    from matplotlib import pyplot

    folder = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ADC_FIGURES", "."))
    folder.mkdir(parents=True, exist_ok=True)
    pyplot.figure()
    draw(pyplot)
    pyplot.savefig(folder / name)
    pyplot.close()
    print(f"figure {name}: saved in {folder}")
