"""Guide, "Example: Hessian": the jacobian of a gradient under nested tapes, then a Newton step.

Prints the kernel's shape (5, 8), the Hessian's (5, 8, 5, 8), that it is symmetric, and the loss
before and after one Newton step, kernel1 - solve(h_mat + eye * 1e-3, g) taken by the adc kernel
samples/newton_step.adc (the guide leaves TensorFlow for np.linalg.solve here), and how far that
step is from NumPy's. Saves hessian.png (heat map).
"""
from pathlib import Path

import numpy as np

import adc
from figures import save

layers = adc.compile_file(Path(__file__).with_name("layers.adc"))
newton = adc.compile_file(Path(__file__).with_name("newton_step.adc"))
rng = np.random.default_rng(0)
x = adc.constant(rng.standard_normal((7, 5)).astype(np.float32))
kernel1 = adc.Variable(rng.standard_normal((5, 8)).astype(np.float32) * 0.5, name="kernel1")
bias1 = adc.Variable(np.full(8, 0.1, np.float32), name="bias1")
kernel2 = adc.Variable(rng.standard_normal((8, 6)).astype(np.float32) * 0.5, name="kernel2")
bias2 = adc.Variable(np.full(6, 0.1, np.float32), name="bias2")


def loss_of_model():
    y = layers.dense_relu(layers.dense_relu(x, kernel1, bias1), kernel2, bias2)
    return adc.reduce_mean(y ** 2)


with adc.GradientTape() as t2:
    with adc.GradientTape() as t1:
        loss = loss_of_model()
    g = t1.gradient(loss, kernel1)
h = t2.jacobian(g, kernel1)
print(f"layer.kernel.shape: {kernel1.shape}")
print(f"h.shape: {h.shape}")

n_params = int(np.prod(kernel1.shape))
g_vec = adc.reshape(g, [n_params, 1]).numpy()
h_mat = adc.reshape(h, [n_params, n_params]).numpy()
print("symmetric:", bool(np.allclose(h_mat, h_mat.T, atol=1e-6)))


def draw_hessian(plt):
    bound = np.abs(h_mat).max()
    plt.imshow(h_mat, cmap="seismic", vmin=-bound, vmax=bound)
    plt.colorbar(shrink=0.75)
    plt.title("The Hessian")


save("hessian.png", draw_hessian)

# Newton's method: the second-order model's minimum, one step, solved in the kernel
before = float(loss)
stepped = newton.newton_step(kernel1, g, h, np.float32(1e-3))
eye_eps = np.eye(n_params, dtype=np.float32) * 1e-3
numpy_step = kernel1.numpy() - np.linalg.solve(h_mat + eye_eps, g_vec).reshape(kernel1.shape)
difference = np.abs(stepped.numpy() - numpy_step).max() / np.abs(numpy_step).max()
print(f"Newton step, adc's solve against NumPy's: {difference:.1e} (largest difference / largest weight)")
kernel1.assign(stepped)
print(f"loss before {before:.4f}, after one Newton step {float(loss_of_model()):.4f}")
