"""Newton's method on x**3 + x = c (samples/loops.adc's `cubic_root`), a while loop whose number of
iterations depends on c, differentiated: d x / d c by the tape through the iterations and the
Jacobian by adc.jacobian, against the implicit-function value 1 / (3 x**2 + 1)."""
from pathlib import Path

import numpy as np

import adc

loops = adc.compile_file(Path(__file__).with_name("loops.adc"))
c = adc.Variable(np.array([-8.0, -0.5, 0.0, 2.0, 10.0, 1000.0]))
with adc.GradientTape() as tape:
    x = loops.cubic_root(c, 1e-12)
derivative = tape.gradient(x, c).numpy()
exact = 1.0 / (3.0 * x.numpy() ** 2 + 1.0)
print(f"c          {c.numpy()}")
print(f"x          {x.numpy()}")
print(f"residual   {np.max(np.abs(x.numpy() ** 3 + x.numpy() - c.numpy())):.2e}")
print(f"dx/dc      {derivative}")
print(f"largest difference from 1 / (3 x^2 + 1): {np.max(np.abs(derivative - exact)):.2e}")

jacobian = adc.jacobian(loops.cubic_root, wrt="c")(c, 1e-12).numpy()
print(f"adc.jacobian is diagonal: {np.count_nonzero(jacobian - np.diag(np.diag(jacobian))) == 0}, "
      f"its diagonal is dx/dc: {np.allclose(np.diag(jacobian), derivative, rtol=1e-12)}")
