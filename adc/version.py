"""adc's version, defined here once: the package metadata (pyproject.toml), `adc.__version__`,
`adc --version` and every compiled module's metadata read it."""

__version__ = "0.1.0"
