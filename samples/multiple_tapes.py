"""Guide, "Multiple tapes": each tape watches its own tensors.

Prints 1.0 (cos 0) and 0.25 (sigmoid'(0)).
"""
import adc

x0 = adc.constant(0.0)
x1 = adc.constant(0.0)
with adc.GradientTape() as tape0, adc.GradientTape() as tape1:
    tape0.watch(x0)
    tape1.watch(x1)
    y0 = adc.sin(x0)
    y1 = adc.nn.sigmoid(x1)
    y = y0 + y1
    ys = adc.reduce_sum(y)
print(tape0.gradient(ys, x0).numpy())  # cos(x) => 1.0
print(tape1.gradient(ys, x1).numpy())  # sigmoid(x1)*(1-sigmoid(x1)) => 0.25
