"""adc: an array language for numerical kernels with automatic differentiation."""
