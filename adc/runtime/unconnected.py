"""adc.UnconnectedGradients: what a derivative is for a source the target does not depend on.

GradientTape.gradient, its Jacobians and ForwardAccumulator.jvp take it
(`unconnected_gradients=`), as tf.UnconnectedGradients: None, or zeros of the source's shape.

    t.gradient(y, [x, c], unconnected_gradients="zero")    # [dy/dx, zeros_like(c)]
"""
from __future__ import annotations

import enum


class UnconnectedGradients(enum.Enum):
    """What gradient() returns for a source the target does not depend on."""

    NONE = "none"
    ZERO = "zero"

    @staticmethod
    def of(value, where: str) -> "UnconnectedGradients":
        """`value` ('none', 'zero' or a member) as a member; ValueError naming the parameter otherwise."""
        if isinstance(value, UnconnectedGradients):     # the usual case, on every gradient() call
            return value
        try:
            return UnconnectedGradients(value)
        except ValueError:
            raise ValueError(f"{where}: unconnected_gradients must be 'none', 'zero' or an "
                             f"adc.UnconnectedGradients, got {value!r}") from None
