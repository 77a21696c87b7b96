"""Guide, "Reset / start recording from scratch": GradientTape.reset() drops what was recorded.

Prints dz/dx: 4.0 and dz/dy: None.
"""
import adc

x = adc.Variable(2.0)
y = adc.Variable(3.0)
reset = True
with adc.GradientTape() as t:
    y_sq = y * y
    if reset:
        t.reset()  # throw out all the tape recorded so far
    z = x * x + y_sq
grad = t.gradient(z, {'x': x, 'y': y})
print('dz/dx:', grad['x'])  # 2*x => 4
print('dz/dy:', grad['y'])
