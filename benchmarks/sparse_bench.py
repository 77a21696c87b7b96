"""Sparse Jacobians side by side: adc (pattern detected from the IR, cached; colored seeds through
one batched JVP; values into a preallocated array) against JAX's dense jit(jacfwd), sparsejac and
asdex (JAX with a pattern), and CasADi (SX function `jacobian`, called through its Function and
through its generated C code compiled with gcc). Then the cart-pole sample's Lagrangian Hessian
against CasADi's, and its IPOPT solve with adc's derivatives against CasADi's. Each line prints
the nonzeros and colors.

    python benchmarks/run.py sparse
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import adc
from adc.frontend import compile_source
from adc.passes.sparsity import jacobian_patterns
from adc.passes.sparsity.compression import compress
from timing import fastest, optional, report, timed

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "samples")]     # the tests' structured problems, the cart-pole sample
from tests.support.cartpole_casadi import CasadiSwingUp, cartpole_nlp, casadi_solver  # noqa: E402
from tests.support.sparse_problems import BRUSSELATOR  # noqa: E402

BURGERS = """
def burgers(u: f64[N]) -> f64[N-2]:
    return (u[:N-2] - 2.0 * u[1:N-1] + u[2:]) * 1e4 - u[1:N-1] * (u[2:] - u[:N-2]) * 50.0
"""


def brusselator_numpy_like(xp, roll):
    """The same residual written for JAX (xp = jax.numpy) or CasADi (xp, roll: its own shifts)."""
    def residual(x, n):
        u, v = x[0], x[1]

        def laplacian(w):
            return roll(w, 1, 0) + roll(w, -1, 0) + roll(w, 1, 1) + roll(w, -1, 1) - 4.0 * w
        du = 1.0 + u * u * v - 4.4 * u + 0.1 * laplacian(u)
        dv = 3.4 * u - u * u * v + 0.1 * laplacian(v)
        return xp.stack([du, dv])
    return residual


def best(peer: str, routes: dict[str, float]) -> dict[str, float]:
    """The peer's fastest route, or nothing when it has none (not installed)."""
    return fastest(peer, routes) if routes else {}


CASADI_C_BYTES = 8_000_000    # CasADi's generated C above this is not built: gcc -O3 takes minutes a MB
# gcc's memory grows with the generated function: the Brusselator's at grid 64 (3.5 MB of C) took
# gcc -O3 past 22 GB in 6 minutes, where the cart-pole's Hessian (4.3 MB) builds in 20 s. So gcc
# runs with its address space capped at this share of the machine's memory: out of it, it stops
# and says so, rather than the kernel's OOM killer choosing among the machine's processes.
GCC_MEMORY_SHARE = 0.6
CASADI_C_SECONDS = 1200       # nor timed when gcc takes longer (the Brusselator at grid 64 on a loaded machine)


def casadi_routes(build, size: int, x: np.ndarray, expected) -> tuple[dict[str, float], str]:
    """CasADi's Jacobian of `build(symbol)` evaluated by its Function and by its generated C code,
    and why the C code was not timed ("" when it was)."""
    casadi = optional("casadi")
    if casadi is None:
        return {}, ""
    sym = casadi.SX.sym("x", size)
    jac = casadi.Function("jacobian_values", [sym], [casadi.jacobian(build(casadi, sym), sym)])
    got = jac(x)
    np.testing.assert_allclose(np.asarray(got.nonzeros()).sum(), expected, rtol=1e-9)
    routes = {"casadi Function": timed(lambda: jac(x))}
    compiled = _casadi_c(casadi, jac, [x])
    if isinstance(compiled, str):
        return routes, f"\n  (casadi gcc -O3 C skipped: {compiled})"
    np.testing.assert_allclose(compiled().sum(), expected, rtol=1e-9)
    routes["casadi gcc -O3 C"] = timed(compiled)
    return routes, ""


def _casadi_c(casadi, function, inputs: list[np.ndarray]):
    """A call of CasADi's generated C code for `function` (its first result's nonzeros, on these
    inputs), compiled by gcc -O3; or why it was not built (too large, no gcc, gcc failed)."""
    folder = Path(tempfile.mkdtemp(prefix="adc-casadi-"))
    name = function.name()
    source = function.generate(f"{name}.c", {"with_header": False})
    Path(source).rename(folder / f"{name}.c")
    size = (folder / f"{name}.c").stat().st_size
    if size > CASADI_C_BYTES:
        return f"its generated C is {size / 1e6:.0f} MB, above {CASADI_C_BYTES / 1e6:.0f} MB (gcc -O3 takes minutes a MB)"
    try:
        # the cap set by the shell gcc runs in (a preexec_fn is unsafe in a process with threads: JAX's)
        subprocess.run(["sh", "-c", f'ulimit -v {_memory_cap() >> 10} && exec gcc "$@"', "gcc", "-O3", "-march=native",
                        "-shared", "-fPIC", "-o", str(folder / f"{name}.so"), str(folder / f"{name}.c")],
                       check=True, capture_output=True, timeout=CASADI_C_SECONDS)
    except subprocess.TimeoutExpired:
        return f"gcc -O3 did not finish its {size / 1e6:.1f} MB in {CASADI_C_SECONDS} s"
    except subprocess.CalledProcessError as error:
        stderr = error.stderr.decode(errors="replace")
        if any(said in stderr for said in ("Killed signal", "memory exhausted", "out of memory")):
            return f"gcc -O3 ran out of memory on its {size / 1e6:.1f} MB (capped at {_memory_cap() / 2**30:.0f} GB)"
        return f"gcc failed: {stderr.strip().splitlines()[-1] if stderr.strip() else error.returncode}"
    except OSError as error:
        return f"gcc failed: {error}"
    lib = ctypes.CDLL(str(folder / f"{name}.so"))
    real_p, int_t = ctypes.POINTER(ctypes.c_double), ctypes.c_longlong
    arg, res = (real_p * max(function.sz_arg(), 1))(), (real_p * max(function.sz_res(), 1))()
    iw, w = (int_t * max(function.sz_iw(), 1))(), (ctypes.c_double * max(function.sz_w(), 1))()
    values = np.empty(function.sparsity_out(0).nnz())
    kept = [np.ascontiguousarray(a, np.float64) for a in inputs]
    for k, a in enumerate(kept):
        arg[k] = a.ctypes.data_as(real_p)
    res[0] = values.ctypes.data_as(real_p)
    call = getattr(lib, name)

    def evaluate(buffers=(arg, res, iw, w, kept)):       # the default keeps the buffers alive
        call(*buffers[:4], 0)
        return values
    return evaluate


def _memory_cap() -> int:
    """GCC_MEMORY_SHARE of the machine's memory, in bytes."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * GCC_MEMORY_SHARE)


def bench_brusselator(grid: int) -> None:
    m = adc.compile(BRUSSELATOR, "brusselator.adc")
    x = np.random.default_rng(0).uniform(0, 1, (2, grid, grid))
    jac = adc.jacobian(m.brusselator, sparse=True)
    reference = jac(x)
    routes = adc_routes(m.brusselator, x)
    others = {}
    jax = optional("jax")
    if jax:
        jax.config.update("jax_enable_x64", True)
        jnp = jax.numpy
        residual = brusselator_numpy_like(jnp, jnp.roll)
        f = lambda v: residual(v, grid).ravel()     # noqa: E731
        jx = jnp.asarray(x.ravel().reshape(2, grid, grid))
        peer = {}
        if not _dense_skipped(grid):
            dense = jax.jit(jax.jacfwd(lambda v: f(v.reshape(2, grid, grid))))
            flat = jx.ravel()
            np.testing.assert_allclose(np.asarray(dense(flat))[reference.nonzero()], reference.data, rtol=1e-9)
            peer["jit(jacfwd) dense"] = timed(lambda: dense(flat).block_until_ready(), repeats=3)
        others |= best("jax", peer)
        others |= _jax_sparse_routes(jax, lambda v: f(v.reshape(2, grid, grid)), jx.ravel(), reference)
    theirs, skipped = casadi_routes(_casadi_brusselator(grid), 2 * grid * grid, x.ravel(), reference.data.sum())
    others |= best("casadi", theirs)
    report(f"Brusselator 2-D Jacobian, grid {grid} ({2 * grid * grid} unknowns): {reference.nnz:,} nonzeros, "
           f"{reference.nnz / reference.shape[0]:.0f} per row, {jac.colors} colors{_dense_skipped(grid)}{skipped}",
           routes, others,
           "adc >= 100x dense JAX at grid 64; <= 1.0x CasADi (casadi/adc >= 1)")


def adc_routes(kernel, *args) -> dict[str, float]:
    """adc's sparse Jacobian, values into a preallocated array: the route it takes (the nonzeros
    computed directly where it can, passes/sparsity/nonzeros.py), and the coloring's forward seeds."""
    routes = {}
    for mode in ("auto", "forward"):
        jac = adc.jacobian(kernel, mode=mode, sparse=True)
        out = np.empty(jac(*args).nnz)
        routes[f"sparse values(out=), {jac.route}"] = timed(lambda: jac.values(*args, out=out))
    return routes


def _dense_skipped(grid: int) -> str:
    """Why JAX's dense Jacobian is not timed at this grid (it must fit in 2 GB), or ""."""
    n = 2 * grid * grid
    if n * n * 8 <= 2 * 1024 ** 3:
        return ""
    return f"\n  (jax jit(jacfwd) dense skipped: its {n:,} x {n:,} Jacobian takes {n * n * 8 / 1e9:.1f} GB)"


def _jax_sparse_routes(jax, f, x, reference) -> dict[str, float]:
    """sparsejac (the pattern given) and asdex (the pattern detected), jitted, each when installed."""
    routes = {}
    sparsejac = optional("sparsejac")
    if sparsejac:
        from jax.experimental import sparse as jax_sparse
        coo = reference.tocoo()
        pattern = jax_sparse.BCOO((np.ones(coo.nnz), np.stack([coo.row, coo.col], 1)), shape=coo.shape)
        jac = jax.jit(sparsejac.jacfwd(f, sparsity=pattern))
        routes["sparsejac jit(jacfwd)"] = timed(lambda: jac(x).data.block_until_ready())
    asdex = optional("asdex")
    if asdex:
        coloring = asdex.jacobian_coloring(f, x)
        jac = jax.jit(asdex.jacobian_from_coloring(f, coloring))
        routes["asdex jit"] = timed(lambda: jac(x).data.block_until_ready())
    return best("jax sparse", routes)


def _casadi_brusselator(grid: int):
    def build(casadi, sym):
        def roll(w, shift, axis):
            k = shift % grid
            if axis == 0:
                return casadi.vertcat(w[grid - k:, :], w[:grid - k, :])
            return casadi.horzcat(w[:, grid - k:], w[:, :grid - k])
        u = casadi.reshape(sym[:grid * grid], grid, grid).T      # row-major, as NumPy's
        v = casadi.reshape(sym[grid * grid:], grid, grid).T
        lap = lambda w: roll(w, 1, 0) + roll(w, -1, 0) + roll(w, 1, 1) + roll(w, -1, 1) - 4.0 * w   # noqa: E731
        du = 1.0 + u * u * v - 4.4 * u + 0.1 * lap(u)
        dv = 3.4 * u - u * u * v + 0.1 * lap(v)
        return casadi.vertcat(casadi.reshape(du.T, -1, 1), casadi.reshape(dv.T, -1, 1))
    return build


def bench_burgers() -> None:
    n = 100_000
    u = np.random.default_rng(0).uniform(0, 1, n)
    module = compile_source(BURGERS)
    start = time.perf_counter()
    (pattern,) = jacobian_patterns(module, "burgers", [u], 0)
    detected = time.perf_counter() - start
    colors = compress(pattern).count
    detected_and_colored = time.perf_counter() - start
    m = adc.compile(BURGERS, "burgers.adc")
    jac = adc.jacobian(m.burgers, sparse=True)
    reference = jac(u)
    routes = adc_routes(m.burgers, u)
    theirs, skipped = casadi_routes(
        lambda casadi, s: (s[:n - 2] - 2.0 * s[1:n - 1] + s[2:]) * 1e4 - s[1:n - 1] * (s[2:] - s[:n - 2]) * 50.0,
        n, u, reference.data.sum())
    others = best("casadi", theirs)
    asdex, jax = optional("asdex"), optional("jax")
    detection = f"adc detection {detected * 1e3:.1f} ms, + coloring {detected_and_colored * 1e3:.1f} ms"
    if asdex and jax:
        jax.config.update("jax_enable_x64", True)
        f = lambda s: (s[:n - 2] - 2.0 * s[1:n - 1] + s[2:]) * 1e4 - s[1:n - 1] * (s[2:] - s[:n - 2]) * 50.0  # noqa
        start = time.perf_counter()
        asdex.jacobian_coloring(f, jax.numpy.asarray(u))
        detection += f"; asdex detection + coloring {(time.perf_counter() - start) * 1e3:.1f} ms"
    report(f"Burgers 1-D residual Jacobian, n = {n:,}: {reference.nnz:,} nonzeros, "
           f"{reference.nnz / reference.shape[0]:.0f} per row, {colors} colors\n  ({detection}){skipped}", routes, others,
           "<= 1.0x CasADi (casadi/adc >= 1); detection + coloring <= asdex's")


def bench_cartpole(knots: int = 201) -> None:
    """The cart-pole sample (samples/cartpole.py): its Lagrangian's sparse Hessian against CasADi's
    (the lower triangle IPOPT takes, by its Function and its gcc-compiled C), then IPOPT's solve."""
    casadi = optional("casadi")
    import cartpole     # samples/ is on the path; compiled on first use only
    guess, goal, duration = cartpole.initial_guess(knots), cartpole.GOAL, cartpole.DURATION
    rng = np.random.default_rng(0)
    z, multipliers = guess.ravel() + 0.1 * rng.standard_normal(knots * 5), rng.standard_normal(knots * 4)
    callbacks = cartpole.SwingUp(knots, guess)
    kernel = callbacks.hessian_kernel
    full = np.empty(kernel.sparsity.nnz)
    args = (z.reshape(knots, 5), duration, goal, 0.7, multipliers.reshape(knots, 4))
    routes = {"sparse values(out=)": timed(lambda: kernel.values(*args, out=full)),
              "IPOPT's lower triangle": timed(lambda: callbacks.hessian(z, multipliers, 0.7))}
    others, theirs = {}, ""
    if casadi:
        nlp = cartpole_nlp(casadi, knots, duration, goal)
        lower = casadi.Function("hessian_values", [nlp["z"], nlp["sigma"], nlp["multipliers"]],
                                [casadi.tril(nlp["hessian"])])
        expected = callbacks.hessian(z, multipliers, 0.7).sum()
        np.testing.assert_allclose(np.asarray(lower(z, 0.7, multipliers).nonzeros()).sum(), expected, rtol=1e-9)
        peer = {"Function": timed(lambda: lower(z, 0.7, multipliers))}
        start = time.perf_counter()
        compiled = _casadi_c(casadi, lower, [z, np.array(0.7), multipliers])
        if isinstance(compiled, str):
            theirs = f"; CasADi's C skipped: {compiled}"
        else:
            np.testing.assert_allclose(compiled().sum(), expected, rtol=1e-9)
            peer["gcc -O3 C"] = timed(compiled)
            theirs = f"; CasADi's C built by gcc in {time.perf_counter() - start:.0f} s"
        others = {f"casadi {name}": seconds for name, seconds in peer.items()}
        theirs = f", CasADi's star coloring {nlp['hessian'].sparsity().star_coloring().size2()}" + theirs
    report(f"Cart-pole Lagrangian Hessian, {knots} knots ({knots * 5} variables): {len(callbacks.lower):,} nonzeros "
           f"in the lower triangle, {kernel.colors} colors (adc's acyclic or star coloring, the fewer{theirs})", routes, others,
           "<= 1.0x CasADi (casadi/adc >= 1)")
    bench_cartpole_solve(cartpole, callbacks, knots, casadi)


class TimedCallbacks:
    """cyipopt callbacks whose evaluations (objective, constraints and their derivatives) are timed."""

    def __init__(self, callbacks):
        self.callbacks, self.seconds = callbacks, 0.0

    def __getattr__(self, name):
        method = getattr(self.callbacks, name)
        if name.endswith("structure"):
            return method

        def evaluation(*args):
            start = time.perf_counter()
            out = method(*args)
            self.seconds += time.perf_counter() - start
            return out
        return evaluation


def bench_cartpole_solve(cartpole, callbacks, knots: int, casadi) -> None:
    """IPOPT's whole solve of the cart-pole sample (same options, same start) by each route, and
    the time its evaluations took (CasADi's nlpsol: its own statistics)."""
    def cyipopt_route(route):
        cartpole.solve(route, knots)        # every kernel compiled (or loaded) before the timing
        timed_callbacks = TimedCallbacks(route)
        info = cartpole.solve(timed_callbacks, knots)
        return info, timed_callbacks.seconds
    solved, evaluations = cyipopt_route(callbacks)
    routes = {"cyipopt, adc's sparse derivatives": timed(lambda: cartpole.solve(callbacks, knots), repeats=3)}
    spent = {"adc": (solved["iterations"], evaluations)}
    others = {}
    if casadi:
        theirs = CasadiSwingUp(casadi, knots, cartpole.DURATION, cartpole.GOAL)
        others["casadi Function callbacks"] = timed(lambda: cartpole.solve(theirs, knots), repeats=3)
        info, evaluations = cyipopt_route(theirs)
        spent["casadi Function callbacks"] = (info["iterations"], evaluations)
        lower, upper = cartpole.bounds(knots)
        bounds = {"x0": cartpole.initial_guess(knots).ravel(), "lbx": lower.ravel(), "ubx": upper.ravel(),
                  "lbg": 0, "ubg": 0}
        for name, jit in (("casadi nlpsol", False), ("casadi nlpsol jit", True)):
            start = time.perf_counter()
            solver = casadi_solver(casadi, knots, cartpole.DURATION, cartpole.GOAL, cartpole.IPOPT_OPTIONS, jit)
            built = time.perf_counter() - start
            result = solver(**bounds)
            stats = solver.stats()
            assert stats["success"]
            np.testing.assert_allclose(float(result["f"]), solved["obj_val"], rtol=1e-8)
            spent[name + (f" (gcc: {built:.0f} s)" if jit else "")] = (
                stats["iter_count"], sum(v for k, v in stats.items() if k.startswith("t_wall_nlp_")))
            others[name] = timed(lambda: solver(**bounds), repeats=3)
    report(f"Cart-pole swing-up solved by IPOPT, {knots} knots (iterations, time in evaluations: "
           + "; ".join(f"{k} {n}, {s * 1e3:.1f} ms" for k, (n, s) in spent.items()) + ")", routes, others,
           "adc's derivatives no slower than CasADi's (casadi/adc >= 1; cyipopt's Ipopt and CasADi's are two builds)")


def bench_sparse() -> None:
    print("\n(sparse Jacobians: figures from a loaded machine are noisy; ratios are what to compare)")
    for grid in (32, 64, 128):
        bench_brusselator(grid)
    bench_burgers()
    bench_cartpole()
