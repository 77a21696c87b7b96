"""Everyday kernels of samples/nn.adc, each value and gradient checked, then timed against NumPy's
hand-written version, JAX and PyTorch (their fastest routes) and the memory-traffic floor."""
from __future__ import annotations

from pathlib import Path

import numpy as np

import adc
from timing import fastest, optional, report, timed

NN = Path(__file__).resolve().parent.parent / "samples" / "nn.adc"
F32 = np.float32


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def bench_attention(m) -> None:
    """softmax(Q Kᵀ/√d) V and its gradient w.r.t. Q, K, V for a cotangent dy."""
    rng = np.random.default_rng(0)
    b, t, d = 32, 128, 64
    q, k, v, dy = (rng.standard_normal((b, t, d), F32) for _ in range(4))

    def numpy_both():
        p = _softmax(q @ k.transpose(0, 2, 1) / F32(np.sqrt(d)))
        y = p @ v
        dp = dy @ v.transpose(0, 2, 1)
        ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / F32(np.sqrt(d))
        return y, ds @ k, ds.transpose(0, 2, 1) @ q, p.transpose(0, 2, 1) @ dy

    expected = numpy_both()
    variables = [adc.Variable(a) for a in (q, k, v)]

    def tape_both():
        with adc.GradientTape() as tape:
            y = m.attention(*variables)
        return (y, *tape.gradient(y, variables, output_gradients=dy))

    for got, want in zip(tape_both(), expected):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-3, atol=1e-4)
    others = {"numpy fwd+grad": timed(numpy_both)}
    torch = optional("torch")
    if torch:
        tq, tk, tv = (torch.from_numpy(a.copy()).requires_grad_() for a in (q, k, v))
        tdy = torch.from_numpy(dy)
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def manual():
            y = torch.softmax(tq @ tk.transpose(1, 2) / d ** 0.5, -1) @ tv
            return (y, *torch.autograd.grad(y, (tq, tk, tv), tdy))

        def fused():
            y = sdpa(tq, tk, tv)
            return (y, *torch.autograd.grad(y, (tq, tk, tv), tdy))

        for route in (manual, fused):
            for got, want in zip(route(), expected):
                np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-3, atol=1e-4)
        others |= fastest("torch", {"autograd": timed(manual), "sdpa autograd": timed(fused)})
    jax = optional("jax")
    if jax:
        jnp = jax.numpy

        def attention(q, k, v):
            return jax.nn.softmax(q @ k.transpose(0, 2, 1) / jnp.sqrt(F32(d)), -1) @ v

        def both(q, k, v, dy):
            y, pullback = jax.vjp(attention, q, k, v)
            return (y, *pullback(dy))

        routes = {"jit(vjp)": jax.jit(both)}
        if hasattr(jax.nn, "dot_product_attention"):
            def fused(q, k, v, dy):
                heads = lambda *a: jax.nn.dot_product_attention(*(x[:, :, None] for x in a))[:, :, 0]   # noqa: E731
                y, pullback = jax.vjp(heads, q, k, v)   # (B, T, heads, d) is its layout
                return (y, *pullback(dy))
            routes["jit(vjp(dot_product_attention))"] = jax.jit(fused)
        args = [jnp.asarray(a) for a in (q, k, v, dy)]
        for route in routes.values():
            for got, want in zip(route(*args), expected):
                np.testing.assert_allclose(np.asarray(got), want, rtol=1e-3, atol=1e-4)
        others |= fastest("jax", {name: timed(lambda r=r: jax.block_until_ready(r(*args))) for name, r in routes.items()})
    report(f"attention softmax(Q Kᵀ/√d) V, forward and gradient w.r.t. Q, K, V, B={b} T={t} d={d} f32",
           {"tape: record + gradient": timed(tape_both)}, others, "<= 1.0x the best peer (peer/adc >= 1)")


def bench_cross_entropy(m) -> None:
    """The mean softmax cross-entropy of 4096x1000 logits with integer labels, and its gradient."""
    rng = np.random.default_rng(0)
    n, c = 4096, 1000
    logits = rng.standard_normal((n, c), F32) * 3
    labels = rng.integers(0, c, n)
    out = np.empty_like(logits)

    def numpy_both():
        shifted = logits - logits.max(1, keepdims=True)
        e = np.exp(shifted)
        total = e.sum(1, keepdims=True)
        loss = np.mean(np.log(total[:, 0]) - shifted[np.arange(n), labels])
        grad = e / total
        grad[np.arange(n), labels] -= 1
        return loss, grad / n

    loss, grad = numpy_both()
    variable = adc.Variable(logits)

    def tape_both():
        with adc.GradientTape() as tape:
            y = m.cross_entropy(variable, labels)
        return y, tape.gradient(y, variable)

    gradient_kernel = adc.grad(m.cross_entropy, wrt="logits")
    both_kernel = adc.value_and_grad(m.cross_entropy, wrt="logits")
    for got_loss, got_grad in (tape_both(), (m.cross_entropy(logits, labels), gradient_kernel(logits, labels)),
                               both_kernel(logits, labels)):
        np.testing.assert_allclose(got_loss.numpy(), loss, rtol=1e-5)
        np.testing.assert_allclose(got_grad.numpy(), grad, rtol=1e-4, atol=1e-9)
    routes = {"adc.value_and_grad": timed(lambda: both_kernel(logits, labels)),
              "tape: record + gradient": timed(tape_both),
              "loss, then adc.grad": timed(lambda: (m.cross_entropy(logits, labels), gradient_kernel(logits, labels)))}
    others = {"numpy fwd+grad": timed(numpy_both), "memcpy floor": timed(lambda: np.copyto(out, logits))}
    torch = optional("torch")
    if torch:
        tl = torch.from_numpy(logits.copy()).requires_grad_()
        tlabels = torch.from_numpy(labels)

        def torch_both():
            y = torch.nn.functional.cross_entropy(tl, tlabels)
            return y, torch.autograd.grad(y, tl)[0]

        np.testing.assert_allclose(torch_both()[1].numpy(), grad, rtol=1e-4, atol=1e-9)
        others["torch F.cross_entropy"] = timed(torch_both)
    jax = optional("jax")
    if jax:
        optax_free = jax.jit(jax.value_and_grad(
            lambda x, y: jax.numpy.mean(jax.nn.logsumexp(x, 1) - jax.numpy.take_along_axis(x, y[:, None], 1)[:, 0])))
        jl, jy = jax.numpy.asarray(logits), jax.numpy.asarray(labels)
        np.testing.assert_allclose(np.asarray(optax_free(jl, jy)[1]), grad, rtol=1e-4, atol=1e-9)
        others["jax jit(value_and_grad)"] = timed(lambda: jax.block_until_ready(optax_free(jl, jy)))
    report(f"softmax cross-entropy, loss and gradient, logits {n}x{c} f32, integer labels", routes, others,
           "<= 1.0x the best peer (peer/adc >= 1); <= 1.5x the memcpy floor (floor/adc >= 0.67)")


def bench_embedding(m) -> None:
    """The gradient w.r.t. a 50,000x128 table of a loss over 8,192 looked-up rows (a scatter-add)."""
    rng = np.random.default_rng(0)
    vocabulary, width, n = 50_000, 128, 8192
    table = rng.standard_normal((vocabulary, width), F32)
    tokens = rng.zipf(1.3, n) % vocabulary   # repeated tokens, as in text
    targets = rng.standard_normal((n, width), F32)

    def numpy_gradient():
        grad = np.zeros_like(table)
        np.add.at(grad, tokens, (table[tokens] - targets) * F32(2 / (n * width)))
        return grad

    expected = numpy_gradient()
    kernel = adc.grad(m.embedding_loss, wrt="table")
    np.testing.assert_allclose(kernel(table, tokens, targets).numpy(), expected, rtol=1e-5, atol=1e-10)
    variable = adc.Variable(table)

    def tape_gradient():
        with adc.GradientTape() as tape:
            y = m.embedding_loss(variable, tokens, targets)
        return tape.gradient(y, variable)

    routes = {"adc.grad": timed(lambda: kernel(table, tokens, targets)), "tape: record + gradient": timed(tape_gradient)}
    others = {"numpy np.add.at": timed(numpy_gradient)}
    torch = optional("torch")
    if torch:
        tt = torch.from_numpy(table.copy()).requires_grad_()
        ti, tg = torch.from_numpy(tokens), torch.from_numpy(targets)

        def torch_gradient():
            return torch.autograd.grad(((tt[ti] - tg) ** 2).mean(), tt)[0]

        np.testing.assert_allclose(torch_gradient().numpy(), expected, rtol=1e-5, atol=1e-10)
        others["torch autograd"] = timed(torch_gradient)
    jax = optional("jax")
    if jax:
        jgrad = jax.jit(jax.grad(lambda t, i, y: ((t[i] - y) ** 2).mean()))
        args = [jax.numpy.asarray(a) for a in (table, tokens, targets)]
        np.testing.assert_allclose(np.asarray(jgrad(*args)), expected, rtol=1e-5, atol=1e-10)
        others["jax jit(grad)"] = timed(lambda: jgrad(*args).block_until_ready())
    report(f"embedding gradient, table {vocabulary:,}x{width} f32, {n:,} tokens (repeated)", routes, others,
           "<= 1.0x the best peer (peer/adc >= 1)")


BENCHMARKS = {"attention": bench_attention, "cross_entropy": bench_cross_entropy, "embedding": bench_embedding}
