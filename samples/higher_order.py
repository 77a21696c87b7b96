"""Guide, "Higher-order gradients": nested tapes give second (and third) derivatives.

Prints dy_dx: 3.0, d2y_dx2: 6.0 and d3y_dx3: 6.0.
"""
import adc

x = adc.Variable(1.0)
with adc.GradientTape() as t3:
    with adc.GradientTape() as t2:
        with adc.GradientTape() as t1:
            y = x * x * x
        # computed inside t2's context, so this gradient is differentiable too
        dy_dx = t1.gradient(y, x)
    d2y_dx2 = t2.gradient(dy_dx, x)
d3y_dx3 = t3.gradient(d2y_dx2, x)
print('dy_dx:', dy_dx.numpy())  # 3 * x**2 => 3.0
print('d2y_dx2:', d2y_dx2.numpy())  # 6 * x => 6.0
print('d3y_dx3:', d3y_dx3.numpy())  # 6.0
