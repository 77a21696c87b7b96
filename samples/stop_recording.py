"""Guide, "Stop recording": GradientTape.stop_recording() suspends recording.

Prints dz/dx: 4.0 and dz/dy: None.
"""
import adc

x = adc.Variable(2.0)
y = adc.Variable(3.0)
with adc.GradientTape() as t:
    x_sq = x * x
    with t.stop_recording():
        y_sq = y * y
    z = x_sq + y_sq
grad = t.gradient(z, {'x': x, 'y': y})
print('dz/dx:', grad['x'])  # 2*x => 4
print('dz/dy:', grad['y'])
