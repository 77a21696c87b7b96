"""Guide, "Stop gradient flow with precision": adc.stop_gradient, in Python and in the language.

Prints dz/dx: 4.0 and dz/dy: None, first with eager ops, then with a compiled kernel.
"""
import adc

x = adc.Variable(2.0)
y = adc.Variable(3.0)
with adc.GradientTape() as t:
    y_sq = y**2
    z = x**2 + adc.stop_gradient(y_sq)
grad = t.gradient(z, {'x': x, 'y': y})
print('dz/dx:', grad['x'])  # 2*x => 4
print('dz/dy:', grad['y'])

kernels = adc.compile("""
def z_of(x: f32, y: f32) -> f32:
    return x ** 2 + stop_gradient(y ** 2)
""", "stop_gradient.adc")
with adc.GradientTape() as t:
    z = kernels.z_of(x, y)
grad = t.gradient(z, {'x': x, 'y': y})
print('kernel dz/dx:', grad['x'])
print('kernel dz/dy:', grad['y'])
