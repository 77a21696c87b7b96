"""A PyTorch model whose loss is adc's softmax cross-entropy (samples/nn.adc), trained with Adam.

    python samples/torch_training.py [steps]        # needs torch (pip install 'adc[torch]')

A two-layer classifier of five classes of points around random centres in 20 dimensions. Two
copies of it start from the same weights: one trained with `adc.torch.op(nn.cross_entropy)` as
its loss (its backward is adc's compiled VJP kernel), the other with torch's own
`F.cross_entropy`. Both take the same Adam steps; the sample prints both losses every few steps,
checks they agree to float32 rounding (on the same logits, and along the two trainings, where
rounding differences accumulate), and times a training step of each (median of the steps).
"""
import copy
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

import adc
import adc.torch

nn = adc.compile_file(Path(__file__).with_name("nn.adc"))
cross_entropy = adc.torch.op(nn.cross_entropy)       # (logits: f32[B, C], labels: i64[B]) -> f32


class Classifier(torch.nn.Module):
    def __init__(self, loss, features=20, hidden=32, classes=5):
        super().__init__()
        self.hidden = torch.nn.Linear(features, hidden)
        self.out = torch.nn.Linear(hidden, classes)
        self.loss = loss

    def forward(self, x, labels):
        return self.loss(self.out(torch.relu(self.hidden(x))), labels)


def train(models: dict, x, labels, steps: int) -> dict:
    """Each model's loss and time (forward, backward, Adam's update) at every step, the models
    taking their steps in turn, so a loaded machine slows both alike."""
    optimizers = {name: torch.optim.Adam(model.parameters(), lr=0.01) for name, model in models.items()}
    history = {name: ([], []) for name in models}
    for _ in range(steps):
        for name, model in models.items():
            start = time.perf_counter()
            optimizers[name].zero_grad()
            loss = model(x, labels)
            loss.backward()
            optimizers[name].step()
            history[name][1].append(time.perf_counter() - start)
            history[name][0].append(loss.item())
    return history


def main(steps: int) -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    classes, features, examples = 5, 20, 600
    centres = rng.standard_normal((classes, features)).astype(np.float32) * 0.4
    labels = torch.from_numpy(rng.integers(0, classes, examples))
    x = torch.from_numpy(centres[labels.numpy()] + rng.standard_normal((examples, features)).astype(np.float32))

    with_adc = Classifier(cross_entropy)
    with_torch = copy.deepcopy(with_adc)
    with_torch.loss = torch.nn.functional.cross_entropy
    history = train({"adc": with_adc, "torch": with_torch}, x, labels, steps)
    (adc_losses, adc_times), (torch_losses, torch_times) = history["adc"], history["torch"]
    for step in range(0, steps, max(1, steps // 10)):
        print(f"step {step:3d}  adc loss {adc_losses[step]:.6f}  torch loss {torch_losses[step]:.6f}")
    worst = max(abs(a - t) for a, t in zip(adc_losses, torch_losses))
    print(f"largest difference of the losses along the way: {worst:.1e}")
    assert worst < 1e-4, "the two trainings drifted apart by more than float32 rounding accumulates"
    logits = with_torch.out(torch.relu(with_torch.hidden(x))).detach()
    errors = [abs(loss.item() - torch.nn.functional.cross_entropy(logits.double(), labels).item())
              for loss in (cross_entropy(logits, labels), torch.nn.functional.cross_entropy(logits, labels))]
    bound = rounding_bound(logits.numpy())
    print(f"on the same logits, from the float64 loss: adc's {errors[0]:.1e}, torch's {errors[1]:.1e} "
          f"(float32 rounding bound {bound:.1e})")
    assert errors[0] <= bound, "adc's loss is farther from the exact one than float32 rounding allows"
    per_step = {name: statistics.median(times[1:] or times) for name, times in (("adc", adc_times),
                                                                                 ("torch", torch_times))}
    print(f"time per step: adc loss {per_step['adc'] * 1e6:.0f} us, torch loss {per_step['torch'] * 1e6:.0f} us "
          f"(adc/torch = {per_step['adc'] / per_step['torch']:.2f})")


def rounding_bound(logits: np.ndarray) -> float:
    """How far a float32 mean cross-entropy may be from the exact one on these logits: each
    example's log-sum-exp and picked logit are rounded a few times at the scale of its largest
    logit (not of the loss, which training drives toward 0: a relative bound on the loss fails
    once it is small)."""
    scale = np.abs(logits).max(axis=1).mean() + np.log(logits.shape[1])
    return float(4 * np.finfo(np.float32).eps * scale)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
