"""adc benchmarks: every figure is measured side by side in this one run.

    python benchmarks/run.py                        # all of them
    python benchmarks/run.py batch_jacobian hessian # some
    python benchmarks/run.py matmul_grid            # a @ b: six shapes, f32 and f64, 1 and 2 threads (matmul_grid.py)
    python benchmarks/run.py compile                # compile latency, fresh processes (compile_times.py)
    python benchmarks/run.py dask                   # adc.dask: one process, threads, a cluster (dask_bench.py)
    python benchmarks/run.py sparse                 # sparse Jacobians vs JAX, sparsejac, asdex, CasADi (sparse_bench.py)
    python benchmarks/run.py interop                # adc.torch and adc.jax: per-call cost (interop_bench.py)
    python benchmarks/run.py linalg [--quick]       # linear algebra, f64 (linalg_bench.py); --quick: small sizes

The run starts with the machine: CPU model, AVX2/AVX-512F/FMA, cores, LLVM's name for the CPU,
and each peer's BLAS (benchmarks/machine.py; docs/performance.md keeps figures per CPU family).
Each line prints the median time per call of adc and of the alternatives a user
would pick (NumPy always; JAX and PyTorch when installed), and the ratio
alternative / adc (> 1 means adc is faster). Targets are printed with them.
"""
from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import numpy as np

import adc
from compile_times import bench_compile
from everyday import BENCHMARKS as EVERYDAY
from loops_bench import BENCHMARKS as LOOPS, bench_loop_memory
from machine import describe
from matmul_grid import bench_matmul_grid
from sparse_bench import bench_sparse
from timing import fastest, optional, report, timed

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def bench_sigmoid_shift(m) -> None:
    n = 4_000_000
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    delta = np.float32(0.5)
    out = np.empty_like(x)
    others = {"numpy": timed(lambda: 1 / (1 + np.exp(-(x + delta)))),
              "numpy memcpy": timed(lambda: np.copyto(out, x))}
    torch = optional("torch")
    if torch:
        tx = torch.from_numpy(x)
        others["torch"] = timed(lambda: torch.sigmoid(tx + 0.5))
    jax = optional("jax")
    if jax:
        f = jax.jit(lambda v: jax.nn.sigmoid(v + 0.5))
        jx = jax.numpy.asarray(x)
        others["jax"] = timed(lambda: f(jx).block_until_ready())
    report(f"sigmoid_shift, {n:,} f32", timed(lambda: m.sigmoid_shift(x, delta)), others,
           "numpy/adc >= 5x; adc within 1.5x of memcpy (memcpy/adc >= 0.67x)")


def bench_trig() -> None:
    """sin and cos of 1M elements: small arguments, and arguments up to 1e6 (f32: beyond 2^17,
    so each nest runs the fast variant, then again the exact one)."""
    m = adc.compile("".join(f"def {f}_{t}(x: {t}[N]) -> {t}[N]:\n    return {f}(x)\n"
                            for f in ("sin", "cos") for t in ("f32", "f64")), "trig.adc")
    rng = np.random.default_rng(0)
    for t in ("f32", "f64"):
        for bound in (100.0, 1e6):
            x = rng.uniform(-bound, bound, 1_000_000).astype(t.replace("f", "float"))
            for f in ("sin", "cos"):
                kernel, reference = getattr(m, f"{f}_{t}"), getattr(np, f)
                report(f"{f}, 1,000,000 {t}, |x| < {bound:g}", timed(lambda: kernel(x)),
                       {"numpy": timed(lambda: reference(x))},
                       "numpy/adc >= 0.8 for f32 (NumPy's SIMD sin/cos), >= 5 for f64")


def bench_mlp_loss(m) -> None:
    x, w1, b1, w2, b2 = mlp_inputs()

    def numpy_loss():
        h = np.maximum(x @ w1 + b1, 0)
        y = np.maximum(h @ w2 + b2, 0)
        return np.mean(y ** 2)

    others = {"numpy": timed(numpy_loss)}
    torch = optional("torch")
    if torch:
        tx, tw1, tb1, tw2, tb2 = (torch.from_numpy(a) for a in (x, w1, b1, w2, b2))
        others["torch"] = timed(lambda: torch.mean(torch.relu(torch.relu(tx @ tw1 + tb1) @ tw2 + tb2) ** 2))
    report("mlp_loss forward, B=256, 784->512->10 f32", timed(lambda: m.mlp_loss(x, w1, b1, w2, b2)), others,
           "adc within 1.5x of numpy (numpy/adc >= 0.67x)")


def mlp_inputs():
    rng = np.random.default_rng(0)
    f32 = np.float32
    return (rng.standard_normal((256, 784), f32), rng.standard_normal((784, 512), f32) * 0.05,
            rng.standard_normal(512, f32), rng.standard_normal((512, 10), f32) * 0.05, rng.standard_normal(10, f32))


def bench_mlp_gradient(m) -> None:
    x, *params = mlp_inputs()
    variables = [adc.Variable(p) for p in params]
    forward = timed(lambda: m.mlp_loss(x, *variables))

    def record_and_gradient():
        with adc.GradientTape() as tape:
            loss = m.mlp_loss(x, *variables)
        return tape.gradient(loss, variables)

    record_and_gradient()  # compiles the gradient kernel once
    with adc.GradientTape(persistent=True) as persistent:
        loss = m.mlp_loss(x, *variables)
    gradient = timed(lambda: persistent.gradient(loss, variables))
    both = timed(record_and_gradient)
    w1, b1, w2, b2 = params

    def numpy_forward_and_gradient():
        z1 = x @ w1 + b1
        h = np.maximum(z1, 0)
        z2 = h @ w2 + b2
        y = np.maximum(z2, 0)
        dz2 = (2 / y.size) * y * (z2 > 0)
        dz1 = (dz2 @ w2.T) * (z1 > 0)
        return x.T @ dz1, dz1.sum(0), h.T @ dz2, dz2.sum(0)

    others = {"numpy fwd+grad": timed(numpy_forward_and_gradient)}
    torch = optional("torch")
    if torch:
        tx = torch.from_numpy(x)
        tp = [torch.from_numpy(p.copy()).requires_grad_() for p in params]

        def torch_grad():
            loss = torch.mean(torch.relu(torch.relu(tx @ tp[0] + tp[1]) @ tp[2] + tp[3]) ** 2)
            return torch.autograd.grad(loss, tp)
        others["torch fwd+grad"] = timed(torch_grad)
    print("\nmlp_loss gradient w.r.t. w1, b1, w2, b2, B=256, 784->512->10 f32")
    print(f"  forward        {forward * 1e3:9.3f} ms")
    print(f"  gradient()     {gradient * 1e3:9.3f} ms   gradient/forward = {gradient / forward:5.2f}x")
    print(f"  record+grad    {both * 1e3:9.3f} ms   (record+gradient)/forward = {both / forward:5.2f}x")
    for name, t in others.items():
        print(f"  {name:14s} {t * 1e3:9.3f} ms   {name}/adc record+grad = {t / both:5.2f}x")
    print("  target: gradient/forward <= 3x (the cheap-gradient bound)")


def bench_matmul() -> None:
    n = 1024
    m = adc.compile("def product(a: f32[M, K], b: f32[K, N]) -> f32[M, N]:\n    return a @ b\n", "product.adc")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(m.product(a, b).numpy(), a.astype(np.float64) @ b, rtol=1e-3, atol=1e-3)
    adc_time = timed(lambda: m.product(a, b))
    others = {"numpy (BLAS)": timed(lambda: a @ b)}
    torch = optional("torch")
    if torch:
        ta, tb = torch.from_numpy(a.copy()), torch.from_numpy(b.copy())
        others["torch"] = timed(lambda: ta @ tb)
    flops = 2 * n ** 3
    report(f"matmul {n}x{n} @ {n}x{n} f32, all threads: adc {flops / adc_time / 1e9:.0f} GFLOP/s, "
           f"numpy {flops / others['numpy (BLAS)'] / 1e9:.0f} GFLOP/s", adc_time, others,
           "level with the BLAS NumPy uses")


def bench_small_tape() -> None:
    x, y = adc.Variable(2.0), adc.Variable(3.0)

    def step():
        with adc.GradientTape() as t:
            z = x * x + y * y
        return t.gradient(z, [x, y])

    per_iteration = timed(step)
    others = {}
    torch = optional("torch")
    if torch:
        tx, ty = torch.tensor(2.0, requires_grad=True), torch.tensor(3.0, requires_grad=True)
        others["torch"] = timed(lambda: torch.autograd.grad(tx * tx + ty * ty, [tx, ty]))
    print("\nguide's smallest tape: z = x*x + y*y on two scalar variables, recorded and differentiated")
    print(f"  adc            {per_iteration * 1e6:9.1f} us per iteration")
    for name, t in others.items():
        print(f"  {name:14s} {t * 1e6:9.1f} us   {name}/adc = {t / per_iteration:5.2f}x")
    print("  target: adc <= 0.6x PyTorch eager's time per iteration (torch/adc >= 1.67)")


def bench_batch_jacobian() -> None:
    from adc.runtime.jacobians import _one_hot_seeds, _walk

    rng = np.random.default_rng(0)
    f32 = np.float32
    x = adc.constant(rng.standard_normal((512, 64), f32))
    w1, b1 = adc.Variable(rng.standard_normal((64, 128), f32) * 0.1), adc.Variable(np.zeros(128, f32))
    w2, b2 = adc.Variable(rng.standard_normal((128, 64), f32) * 0.1), adc.Variable(np.zeros(64, f32))
    with adc.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
        tape.watch(x)
        y = adc.elu(adc.elu(x @ w1 + b1) @ w2 + b2)
    expected = tape.batch_jacobian(y, x).numpy()
    np.testing.assert_allclose(tape.batch_jacobian(y, x, mode="forward").numpy(), expected, atol=1e-5)
    batched = {f"tape, {mode} mode": timed(lambda mode=mode: tape.batch_jacobian(y, x, mode=mode))
               for mode in ("reverse", "forward")}
    m = adc.compile("def mlp(x: f32[B, I], w1: f32[I, H], b1: f32[H], w2: f32[H, O], b2: f32[O]) -> f32[B, O]:\n"
                    "    return elu(elu(x @ w1 + b1) @ w2 + b2)\n", "batch_jacobian.adc")
    arrays = [v.numpy() for v in (x, w1, b1, w2, b2)]
    for mode in ("forward", "reverse"):
        kernel = adc.batch_jacobian(m.mlp, wrt="x", mode=mode)
        np.testing.assert_allclose(kernel(*arrays).numpy(), expected, atol=1e-5)
        batched[f"adc.batch_jacobian(mode={mode!r})"] = timed(lambda k=kernel: k(*arrays))

    def full_then_diagonal(chunk=512):
        """All 32768 rows of the (512, 64, 512, 64) Jacobian (4.3 GB if kept), 512 seeds per walk;
        each chunk keeps its diagonal blocks d y[b] / d x[b]."""
        nodes, diagonal = tape.take_nodes([y], "jacobian"), np.empty((512, 64, 64), f32)
        for lo in range(0, y.size, chunk):
            (rows,) = _walk(nodes, y, _one_hot_seeds(y, 1, lo, lo + chunk), [x])
            examples = np.arange(lo, lo + chunk) // 64
            diagonal[examples, np.arange(lo, lo + chunk) % 64] = rows.numpy()[np.arange(chunk), examples]
        return diagonal

    start = time.perf_counter()
    diagonal = full_then_diagonal()          # ~40 s: timed once, after batch_jacobian compiled the kernels
    others = {"adc full+diag": time.perf_counter() - start}
    assert np.allclose(diagonal, expected, atol=1e-5)
    params = [v.numpy() for v in (x, w1, b1, w2, b2)]
    torch = optional("torch")
    if torch:
        tx, tw1, tb1, tw2, tb2 = (torch.from_numpy(p.copy()) for p in params)
        elu = torch.nn.functional.elu
        routes = {}
        for mode in ("jacrev", "jacfwd"):
            jac = torch.func.vmap(getattr(torch.func, mode)(lambda v: elu(elu(v @ tw1 + tb1) @ tw2 + tb2)))
            assert np.allclose(jac(tx).numpy(), expected, atol=1e-5)
            routes[f"vmap({mode})"] = timed(lambda jac=jac: jac(tx))
        others.update(fastest("torch", routes))
    jax = optional("jax")
    if jax:
        jx, jw1, jb1, jw2, jb2 = map(jax.numpy.asarray, params)
        elu = jax.nn.elu
        routes = {}
        for mode in ("jacrev", "jacfwd"):
            jac = jax.jit(jax.vmap(getattr(jax, mode)(lambda v: elu(elu(v @ jw1 + jb1) @ jw2 + jb2))))
            assert np.allclose(np.asarray(jac(jx)), expected, atol=1e-5)
            routes[f"jit(vmap({mode}))"] = timed(lambda jac=jac: jac(jx).block_until_ready())
        others.update(fastest("jax", routes))
    report("batch_jacobian, 2-layer elu MLP, x 512x64 -> 128 -> 64 f32: result (512, 64, 64)\n"
           "  (adc tape: 64 per-example seeds in one walk over the eager ops, backward or forward; "
           "adc.batch_jacobian: one compiled kernel; full+diag: all 32768 seeds, 512 per walk, timed once)",
           batched, others, "adc full+diag / adc >= 20x; <= 1.0x the best peer (peer/adc >= 1)")


def bench_hessian() -> None:
    rng = np.random.default_rng(0)
    f32 = np.float32
    x = adc.constant(rng.standard_normal((128, 64), f32))
    w1, b1 = adc.Variable(rng.standard_normal((64, 32), f32) * 0.1), adc.Variable(np.zeros(32, f32))
    w2, b2 = adc.Variable(rng.standard_normal((32, 10), f32) * 0.1), adc.Variable(np.zeros(10, f32))

    def hessian():
        with adc.GradientTape() as t2:
            with adc.GradientTape() as t1:
                loss = adc.reduce_mean(adc.tanh(adc.tanh(x @ w1 + b1) @ w2 + b2) ** 2)
            g = t1.gradient(loss, w1)
        return t2.jacobian(g, w1)

    expected = hessian().numpy()
    assert expected.shape == (64, 32, 64, 32)
    params = [v.numpy() for v in (x, w1, b1, w2, b2)]
    m = adc.compile("def loss(x: f32[B, I], w1: f32[I, H], b1: f32[H], w2: f32[H, O], b2: f32[O]) -> f32:\n"
                    "    return mean(tanh(tanh(x @ w1 + b1) @ w2 + b2) ** 2)\n", "hessian.adc")
    kernels = {"adc.hessian (fwd-over-rev)": adc.hessian(m.loss, wrt="w1"),
               "adc.hessian(mode='reverse')": adc.hessian(m.loss, wrt="w1", mode="reverse")}
    for kernel in kernels.values():
        assert np.allclose(kernel(*params).numpy(), expected, atol=1e-5)
    routes = {name: timed(lambda k=kernel: k(*params), repeats=3) for name, kernel in kernels.items()}
    routes["nested tapes"] = timed(hessian, repeats=3)
    others = {}
    torch = optional("torch")
    if torch:
        tx, tw1, tb1, tw2, tb2 = (torch.from_numpy(p.copy()) for p in params)
        loss = lambda w: (torch.tanh(torch.tanh(tx @ w + tb1) @ tw2 + tb2) ** 2).mean()   # noqa: E731
        peer = {"func.hessian": torch.func.hessian(loss), "jacrev(jacrev)": torch.func.jacrev(torch.func.jacrev(loss))}
        for h in peer.values():
            assert np.allclose(h(tw1).numpy(), expected, atol=1e-5)
        others |= fastest("torch", {name: timed(lambda h=h: h(tw1), repeats=3) for name, h in peer.items()})
    jax = optional("jax")
    if jax:
        jx, jw1, jb1, jw2, jb2 = map(jax.numpy.asarray, params)
        tanh = jax.numpy.tanh
        loss = lambda w: (tanh(tanh(jx @ w + jb1) @ jw2 + jb2) ** 2).mean()   # noqa: E731
        peer = {"jit(hessian)": jax.jit(jax.hessian(loss)), "jit(jacrev(jacrev))": jax.jit(jax.jacrev(jax.jacrev(loss)))}
        for h in peer.values():
            assert np.allclose(np.asarray(h(jw1)), expected, atol=1e-5)
        others |= fastest("jax", {name: timed(lambda h=h: h(jw1).block_until_ready(), repeats=3)
                                  for name, h in peer.items()})
    report("Hessian w.r.t. the (64, 32) first-layer kernel, 2-layer tanh MLP, x 128x64 f32: (64, 32, 64, 32)\n"
           "  (adc: the fastest of its routes; nested tapes: record, gradient, jacobian of it under a second tape)",
           routes, others, "<= 1.0x the best of JAX and PyTorch (their/adc >= 1)")


def bench_jacobian_w() -> None:
    """The Jacobian of relu(x @ W + b) w.r.t. W: 2048 param elements, 4096 result elements, so
    forward mode; each seed W = e_io moves one column of z, hence J[b, o, i, o] = x[b, i] (z > 0)."""
    rng = np.random.default_rng(0)
    f32 = np.float32
    x, w, b = rng.standard_normal((64, 32), f32), rng.standard_normal((32, 64), f32) * 0.2, rng.standard_normal(64, f32)
    m = adc.compile("def dense(x: f32[B, I], w: f32[I, O], b: f32[O]) -> f32[B, O]:\n"
                    "    return relu(x @ w + b)\n", "jacobian_w.adc")

    def floor():
        z = x @ w + b
        jac = np.zeros((64, 64, 32, 64), f32)
        cols = np.arange(64)
        jac[:, cols, :, cols] = (x[:, None, :] * (z > 0)[:, :, None]).transpose(1, 0, 2)
        return jac

    z = x.astype(np.float64) @ w + b
    expected = np.einsum("bi,bo,op->bopi", x, z > 0, np.eye(64)).transpose(0, 1, 3, 2)
    np.testing.assert_allclose(floor(), expected, atol=1e-5)
    kernels = {"jacobian (auto: forward)": adc.jacobian(m.dense, wrt="w"),
               "jacobian(mode='reverse')": adc.jacobian(m.dense, wrt="w", mode="reverse")}
    for kernel in kernels.values():
        np.testing.assert_allclose(kernel(x, w, b).numpy(), expected, atol=1e-5)
    routes = {name: timed(lambda k=kernel: k(x, w, b)) for name, kernel in kernels.items()}
    others = {"numpy floor": timed(floor)}
    torch = optional("torch")
    if torch:
        tx, tw, tb = (torch.from_numpy(a.copy()) for a in (x, w, b))
        dense = lambda v: torch.relu(tx @ v + tb)   # noqa: E731
        peer = {"jacfwd": torch.func.jacfwd(dense), "jacrev": torch.func.jacrev(dense)}
        for jac in peer.values():
            np.testing.assert_allclose(jac(tw).numpy(), expected, atol=1e-5)
        others |= fastest("torch", {name: timed(lambda j=jac: j(tw)) for name, jac in peer.items()})
    jax = optional("jax")
    if jax:
        jx, jw, jb = map(jax.numpy.asarray, (x, w, b))
        dense = lambda v: jax.nn.relu(jx @ v + jb)   # noqa: E731
        peer = {"jit(jacfwd)": jax.jit(jax.jacfwd(dense)), "jit(jacrev)": jax.jit(jax.jacrev(dense))}
        for jac in peer.values():
            np.testing.assert_allclose(np.asarray(jac(jw)), expected, atol=1e-5)
        others |= fastest("jax", {name: timed(lambda j=jac: j(jw).block_until_ready()) for name, jac in peer.items()})
    report("Jacobian of relu(x @ W + b) w.r.t. W (32x64), x 64x32 f32: (64, 64, 32, 64)", routes, others,
           "<= 1.0x the best peer (peer/adc >= 1), <= 5x the NumPy floor (floor/adc >= 0.2)")


def bench_jacfwd_scalar(m) -> None:
    """The Jacobian of sigmoid(x + d) w.r.t. the scalar d: one seed, so one elementwise pass."""
    n = 4_000_000
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    d = np.float32(0.5)

    def floor():
        s = 1 / (1 + np.exp(-(x + d)))
        return s * (1 - s)

    s = 1 / (1 + np.exp(-(x.astype(np.float64) + d)))
    expected = s * (1 - s)
    np.testing.assert_allclose(floor(), expected, atol=1e-6)
    kernel = adc.jacobian(m.sigmoid_shift, wrt="delta")
    np.testing.assert_allclose(kernel(x, d).numpy(), expected, atol=1e-6)
    others = {"numpy floor": timed(floor)}
    jax = optional("jax")
    if jax:
        jx = jax.numpy.asarray(x)
        jac = jax.jit(jax.jacfwd(lambda v: jax.nn.sigmoid(jx + v)))
        np.testing.assert_allclose(np.asarray(jac(d)), expected, atol=1e-6)
        others["jax jit(jacfwd)"] = timed(lambda: jac(d).block_until_ready())
    torch = optional("torch")
    if torch:
        tx = torch.from_numpy(x)
        jac = torch.func.jacfwd(lambda v: torch.sigmoid(tx + v))
        np.testing.assert_allclose(jac(torch.tensor(d)).numpy(), expected, atol=1e-6)
        others["torch jacfwd"] = timed(lambda: jac(torch.tensor(d)))
    report(f"Jacobian of sigmoid(x + d) w.r.t. the scalar d, x {n:,} f32: adc.jacobian (auto: forward)",
           {"jacobian (auto: forward)": timed(lambda: kernel(x, d))}, others,
           "<= 1.0x JAX jit(jacfwd) (jax/adc >= 1)")


def bench_dask() -> None:
    from dask_bench import bench_dask as bench     # needs the dask extra: imported when asked for

    bench()


def bench_interop() -> None:
    from interop_bench import bench_interop as bench     # needs the torch and jax extras: imported when asked for

    bench()


def bench_linalg(quick: bool) -> None:
    from linalg_bench import bench_linalg as bench     # JAX and PyTorch when installed: imported when asked for

    bench(quick)


def main(argv: list[str]) -> int:
    """Every benchmark, or those named on the command line (e.g. `batch_jacobian hessian`);
    `--quick` runs the benchmarks that have sizes (linalg) at small ones."""
    quick = "--quick" in argv
    argv = [name for name in argv if name != "--quick"]
    kernels = functools.cache(lambda: adc.compile_file(SAMPLES / "kernels.adc"))   # compiled when first used
    nn = functools.cache(lambda: adc.compile_file(SAMPLES / "nn.adc"))
    loops = functools.cache(lambda: adc.compile_file(SAMPLES / "loops.adc"))
    benchmarks = {"sigmoid_shift": lambda: bench_sigmoid_shift(kernels()),
                  "mlp_loss": lambda: bench_mlp_loss(kernels()),
                  "mlp_gradient": lambda: bench_mlp_gradient(kernels()), "matmul": bench_matmul,
                  "matmul_grid": bench_matmul_grid,   # matmul_grid.py: shapes x dtypes x 1 and 2 threads
                  "small_tape": bench_small_tape, "trig": bench_trig,
                  "batch_jacobian": bench_batch_jacobian, "hessian": bench_hessian,
                  "jacobian_w": bench_jacobian_w, "jacfwd_scalar": lambda: bench_jacfwd_scalar(kernels()),
                  "compile": bench_compile,   # compile_times.py: compile latency in fresh processes
                  "dask": bench_dask,         # dask_bench.py: adc.dask, one process vs threads vs a cluster
                  "interop": bench_interop,   # interop_bench.py: adc.torch and adc.jax, per call
                  "linalg": lambda: bench_linalg(quick),   # linalg_bench.py: factorizations against LAPACK's peers
                  **{name: lambda b=b: b(nn()) for name, b in EVERYDAY.items()},   # everyday.py: samples/nn.adc
                  **{name: lambda b=b: b(loops()) for name, b in LOOPS.items()},   # loops_bench.py: samples/loops.adc
                  "loop_memory": bench_loop_memory,
                  "sparse": bench_sparse}     # sparse_bench.py: sparse Jacobians vs JAX, sparsejac, asdex, CasADi
    unknown = [name for name in argv if name not in benchmarks]
    if unknown:
        print(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(benchmarks)}", file=sys.stderr)
        return 2
    print(f"adc {adc.__version__}, numpy {np.__version__}, python {sys.version.split()[0]}")
    for line in describe():
        print(f"  {line}")
    for name in argv or benchmarks:
        benchmarks[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
