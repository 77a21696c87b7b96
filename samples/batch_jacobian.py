"""Guide, "Batch Jacobian": per-example Jacobians of a stack, without the extra batch dimension;
and the batch-normalization case, where examples mix, detected instead of silently summed.

Prints the shapes (7, 6, 7, 5) and (7, 6, 5), that batch_jacobian equals the full Jacobian summed
over its source batch axis, then, with batch normalization, the ValueError and the accepted result's
shape. Saves batch_jacobian_patches.png and batch_jacobian_patches_batchnorm.png.
"""
import warnings
from pathlib import Path

import numpy as np

import adc
from figures import save

layers = adc.compile_file(Path(__file__).with_name("layers.adc"))
rng = np.random.default_rng(0)
x = adc.constant(rng.standard_normal((7, 5)).astype(np.float32))
kernel1 = adc.Variable(rng.standard_normal((5, 8)).astype(np.float32) * 0.5)
bias1 = adc.Variable(np.zeros(8, np.float32))
kernel2 = adc.Variable(rng.standard_normal((8, 6)).astype(np.float32) * 0.5)
bias2 = adc.Variable(np.zeros(6, np.float32))


def batch_norm(h):
    """Training-mode batch normalization: each example is normalized with the batch's statistics."""
    mean = adc.reduce_mean(h, axis=0, keepdims=True)
    var = adc.reduce_mean((h - mean) ** 2, axis=0, keepdims=True)
    return (h - mean) * adc.rsqrt(var + 1e-3)


def model(normalize):
    tape = adc.GradientTape(persistent=True, watch_accessed_variables=False)
    with tape:
        tape.watch(x)
        y = layers.dense_elu(x, kernel1, bias1)
        y = layers.dense_elu(batch_norm(y) if normalize else y, kernel2, bias2)
    return tape, y


def patches(j):
    """The (batch, batch) slices of a (7, 6, 7, 5) Jacobian as one image, as the guide draws them."""
    j = np.transpose(j, [1, 0, 3, 2])
    lim = np.abs(j).max()
    j = np.pad(j, [[0, 0], [1, 1], [0, 0], [1, 1]], constant_values=-lim)
    s = j.shape

    def draw(plt):
        plt.imshow(j.reshape(s[0] * s[1], s[2] * s[3]), cmap="seismic", vmin=-lim, vmax=lim,
                   extent=[-0.5, s[2] - 0.5, s[0] - 0.5, -0.5])
    return draw


tape, y = model(normalize=False)
j = tape.jacobian(y, x)
print(j.shape)
save("batch_jacobian_patches.png", patches(j.numpy()))
jb = tape.batch_jacobian(y, x)
print(jb.shape)
j_sum = adc.reduce_sum(j, axis=2)
print("batch_jacobian == jacobian summed over the source batch:", float(adc.reduce_max(abs(jb - j_sum))) < 1e-3)

tape, y = model(normalize=True)
j = tape.jacobian(y, x)
save("batch_jacobian_patches_batchnorm.png", patches(j.numpy()))
try:
    tape.batch_jacobian(y, x)
except ValueError as err:
    print("with batch normalization: ValueError:", str(err).split(":")[1].strip())
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    jb = tape.batch_jacobian(y, x, allow_cross_example=True)
print("accepted with allow_cross_example=True:", jb.shape)
