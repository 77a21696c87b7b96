"""Compile latency: first-ever, cold and warm, each measured in a fresh Python process; JAX side by side.

    python benchmarks/run.py compile
    python benchmarks/compile_times.py          # the same

Every measurement runs in a fresh process (a subprocess; nothing in-process is
reused) whose ADC_CACHE_DIR is its own folder, in one of three states:

    first-ever  an empty cache folder: the shared runtime library is compiled too, or copied from
                the one `pip install` compiled into adc/prebuilt/ (runtime_library.py)
    cold        a folder holding only what a machine keeps once adc has run on it, copied from a
                primed folder (MACHINE_WIDE): the runtime library (runtime/), the host's description
                (host/), the gemm's measured blocks (gemm-blocks/), the marker that the library was
                built ahead (ahead/: without it `import adc` starts a child to build it, a process
                that takes a core for ~0.1 s) and the digest of adc's sources (sources/)
    warm        the folder a first-ever run of the same measurement left: everything cached

Each process runs with ADC_LOG=compile and its log is checked against the state
it is meant to be in (a first-ever run misses the runtime library, a cold run
compiles but not the runtime library, a warm run compiles nothing); a mismatch is
printed with the row as "! ...", and stages a warm run still runs as "note: ...".
A change to adc's sources during the run (another checkout's edits change the cache
fingerprint, so nothing primed matches) is reported at the end. adc's processes read
adc's bytecode from a cache filled beforehand (see Session).
Each measurement is a single first call, so each is run 3 times: the median and
the min-max spread are printed (compile times on a 2-core machine are noisy).

The rows (the children are the `child_*` functions below, run as
`python compile_times.py child NAME ARGS`; each prints its timings as JSON):

0. First-ever: a new machine's first mlp_loss gradient, from the end of `import adc` to the
   gradient's return (compile_file, recording, tape.gradient; row 1's first-ever processes): the
   runtime library is copied from the install (or, where `pip install` did not compile it, built)
   by the child `import adc` starts (adc/build_ahead.py) while the process compiles its kernels.

1. adc.compile_file("samples/kernels.adc"), timed after `import adc` (warm, it loads no LLVM:
   the first kernel call does, ~30 ms).
2. The first mlp_loss gradient (B=256, 784->512->10 f32, adc.Variable params):
   tape recording + tape.gradient, after an untimed compile_file in the same process.
   Recorded by one tape, the call runs the forward half of mlp_loss's split VJP and the gradient
   its backward half, so the timed part compiles both halves (and never the plain forward).
     first-ever  empty folder: the untimed compile_file builds the kernels module, so the timed
                 gradient compiles the runtime library and the halves, the compiler already imported
     cold        runtime library and the kernels module cached (a folder primed by the forward
                 compile only): the timed gradient loads LLVM (compile_file opens a cached module
                 without it), imports the compiler and compiles the halves
     warm        the halves are cached too
3. Cold start across shapes: in one process, the clock started before compile_file,
   Σ of compile_file and the first gradient at B = 256, 1, 7, 1000 (one VJP serves
   every size; B=256 comes first so that its lap is row 2's measurement).
   Rows 1-3 come from the same processes (row 1 is the compile_file lap, row 2 the
   B=256 lap; states as in row 1), except row 2's cold state, which has its own.
   Side by side: JAX jax.jit(jax.grad(loss)) (one compile per shape), PyTorch eager
   and TensorFlow (tf.GradientTape eager and tf.function) when installed, each in a
   fresh process, Σ of the first calls at the same sizes, the clock started after
   the import and the parameters' creation, as for adc.
4. `python -m adc compile samples/kernels.adc -o OUT.so`: the whole command's wall time.
5. A second-order gradient from a .so: row 4's .so (built with another cache folder) is
   loaded in a fresh process, and d/dx Σ d sigmoid_shift(x, 0.5)/dx is taken through
   nested tapes: the inner gradient calls the VJP the .so embeds, the outer one needs
   that VJP's own VJP, compiled from the IR the .so carries (which needs the JIT's
   runtime library in process).
     first-ever  empty folder: the runtime library and the derived kernel are compiled
     cold        runtime library cached          warm  the derived kernel cached too
"""
from __future__ import annotations

import json
import logging  # noqa: F401  imported before any clock: ADC_LOG=compile, which every process runs with so
                # that its state is checked, would import it in adc's first compile (~5 ms) where a user's
                # program without ADC_LOG does not
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNELS = REPO / "samples" / "kernels.adc"
BATCHES = (256, 1, 7, 1000)
REPEATS = 3
STATES = ("first-ever", "cold", "warm")
# The cache's folders a machine keeps once adc has run on it, whatever the program: what a cold
# state starts from (the cache's other folders, modules/ and shared/, hold a program's kernels)
MACHINE_WIDE = ("runtime", "host", "gemm-blocks", "ahead", "sources")


# ---------------------------------------------------------------- the fresh processes

def mlp_arrays(batches):
    """The MLP of benchmarks/run.py (784->512->10 f32): its params, and an input per batch size."""
    import numpy as np

    rng = np.random.default_rng(0)
    f32 = np.float32
    params = (rng.standard_normal((784, 512), f32) * 0.05, rng.standard_normal(512, f32),
              rng.standard_normal((512, 10), f32) * 0.05, rng.standard_normal(10, f32))
    return params, {b: rng.standard_normal((b, 784), f32) for b in batches}


def first_calls(laps: dict, gradient, xs: dict, imported: float | None = None) -> None:
    """Time one call of `gradient(x)` per batch size, into laps["B=..."]; with `imported` (the clock
    just after `import adc`), the first call's end since then, into laps["after import"]."""
    for batch, x in xs.items():
        start = time.perf_counter()
        gradient(x)
        laps[f"B={batch}"] = time.perf_counter() - start
        if imported is not None and "after import" not in laps:
            laps["after import"] = time.perf_counter() - imported


def child_kernels(*batches: str) -> dict:
    """Rows 1-3: compile kernels.adc, then the first mlp_loss gradient at each batch size."""
    params, xs = mlp_arrays(map(int, batches))
    start = time.perf_counter()
    import adc
    imported = time.perf_counter()
    laps = {"import": imported - start}
    variables = [adc.Variable(p) for p in params]

    def gradient(x):
        with adc.GradientTape() as tape:
            loss = m.mlp_loss(x, *variables)
        return tape.gradient(loss, variables)

    start = time.perf_counter()
    m = adc.compile_file(KERNELS)
    laps["compile"] = time.perf_counter() - start
    first_calls(laps, gradient, xs, imported)
    laps["total"] = time.perf_counter() - start
    return laps


def child_jax(*batches: str) -> dict:
    params, xs = mlp_arrays(map(int, batches))
    start = time.perf_counter()
    import jax
    import jax.numpy as jnp
    laps = {"import": time.perf_counter() - start}

    def loss(params, x):
        w1, b1, w2, b2 = params
        return jnp.mean(jax.nn.relu(jax.nn.relu(x @ w1 + b1) @ w2 + b2) ** 2)

    start = time.perf_counter()
    grad = jax.jit(jax.grad(loss))     # NumPy arrays in: the backend's start-up is in the first call
    first_calls(laps, lambda x: jax.block_until_ready(grad(params, x)), xs)
    laps["total"] = time.perf_counter() - start
    return laps


def child_torch(*batches: str) -> dict:
    params, xs = mlp_arrays(map(int, batches))
    start = time.perf_counter()
    import torch
    laps = {"import": time.perf_counter() - start}
    w1, b1, w2, b2 = tensors = [torch.from_numpy(p.copy()).requires_grad_() for p in params]

    def gradient(x):
        x = torch.from_numpy(x)
        loss = torch.mean(torch.relu(torch.relu(x @ w1 + b1) @ w2 + b2) ** 2)
        return torch.autograd.grad(loss, tensors)

    start = time.perf_counter()
    first_calls(laps, gradient, xs)
    laps["total"] = time.perf_counter() - start
    return laps


def child_tensorflow(mode: str, *batches: str) -> dict:
    """TensorFlow's tf.GradientTape, eagerly (mode "eager") or traced by tf.function (mode "function")."""
    params, xs = mlp_arrays(map(int, batches))
    start = time.perf_counter()
    import tensorflow as tf
    laps = {"import": time.perf_counter() - start}
    variables = [tf.Variable(p) for p in params]
    w1, b1, w2, b2 = variables

    def gradient(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.relu(tf.nn.relu(x @ w1 + b1) @ w2 + b2) ** 2)
        return tape.gradient(loss, variables)

    start = time.perf_counter()
    run = tf.function(gradient) if mode == "function" else gradient
    first_calls(laps, lambda x: [g.numpy() for g in run(tf.constant(x))], xs)
    laps["total"] = time.perf_counter() - start
    return laps


def child_second_order(so_path: str) -> dict:
    """Row 5: load a .so, then d/dx of Σ d sigmoid_shift(x, 0.5)/dx through nested tapes."""
    import numpy as np

    start = time.perf_counter()
    import adc
    laps = {"import": time.perf_counter() - start}
    start = time.perf_counter()
    m = adc.load(so_path)
    laps["load"] = time.perf_counter() - start
    x = adc.Variable(np.linspace(-3, 3, 1000, dtype=np.float32))
    start = time.perf_counter()
    with adc.GradientTape() as outer:
        with adc.GradientTape() as inner:
            y = m.sigmoid_shift(x, np.float32(0.5))
        dy_dx = inner.gradient(y, x)
    d2y_dx2 = outer.gradient(dy_dx, x)
    laps["second-order"] = time.perf_counter() - start
    s = 1 / (1 + np.exp(-(x.numpy() + 0.5)))
    assert np.allclose(d2y_dx2.numpy(), s * (1 - s) * (1 - 2 * s), atol=1e-5)
    return laps


def child_preload(*modules: str) -> dict:
    """Fill the bytecode cache (see Session): every module of adc, `modules` and this file's imports."""
    import compileall

    import adc

    compileall.compile_dir(Path(adc.__file__).parent, quiet=1)
    for module in modules:
        __import__(module)
    return {}


CHILDREN = {"preload": child_preload, "kernels": child_kernels, "jax": child_jax, "torch": child_torch,
            "tensorflow": child_tensorflow, "second_order": child_second_order}


# ---------------------------------------------------------------- running them

@dataclass
class Run:
    laps: dict[str, float]      # seconds; "wall": the whole subprocess
    log: str                    # its ADC_LOG=compile lines (stderr)


@dataclass
class Runs:
    """The runs of one measurement, by state."""

    by_state: dict[str, list[Run]] = field(default_factory=dict)
    primed: Path | None = None      # the folder the warm runs use: everything cached

    def times(self, state: str, lap: str) -> list[float]:
        return [run.laps[lap] for run in self.by_state.get(state, [])]


class Session:
    """Fresh processes, and the cache folders they use, under one temporary root.

    adc's processes share one bytecode cache (PYTHONPYCACHEPREFIX), filled before any measurement
    by compiling every module of adc and importing what the processes import: an installed adc has
    its .pyc files, so no run should pay for compiling adc's Python sources (it would, with
    PYTHONDONTWRITEBYTECODE set or the checkout's __pycache__ empty: up to ~0.35 s a process).
    The peers' processes are left as they are: their packages come with their .pyc files."""

    PRELOAD = ("numpy", "numpy.random", "lark", "lark.indenter", "platformdirs", "llvmlite.binding", "adc.driver",
               "adc.compiler", "adc.cli", "adc.codegen.toolchain.aot", "concurrent.futures.process",
               "multiprocessing.popen_fork", "multiprocessing.queues", "multiprocessing.synchronize", "queue", "socket")

    def __init__(self, root: Path):
        self.root, self.count = root, 0
        self.spent: dict[str, float] = {}       # wall seconds of the fresh processes, by state
        self.bytecode = root / "pycache"
        self.child("preload", *self.PRELOAD, state="bytecode")
        self.preloaded = self.bytecode_files()

    def bytecode_files(self) -> set[Path]:
        return set(self.bytecode.rglob("*.pyc"))

    def fresh(self, argv: list[str], cache_dir: Path | None, state: str, env: dict | None = None,
              laps_on_stdout: bool = False, adc: bool = True) -> Run:
        """Run `argv` in a fresh process with ADC_LOG=compile and, for adc (`adc`), the cache folder
        `cache_dir` and the shared bytecode cache; with `laps_on_stdout`, the last line it prints
        is its laps as JSON."""
        environment = {**os.environ, "ADC_LOG": "compile", **(env or {})}
        environment.pop("ADC_CACHE", None)
        if adc:
            environment.pop("PYTHONDONTWRITEBYTECODE", None)
            environment["PYTHONPYCACHEPREFIX"] = str(self.bytecode)
        if cache_dir is not None:
            environment["ADC_CACHE_DIR"] = str(cache_dir)
        start = time.perf_counter()
        result = subprocess.run(argv, cwd=REPO, env=environment, capture_output=True, text=True, timeout=600)
        wall = time.perf_counter() - start
        self.spent[state] = self.spent.get(state, 0.0) + wall
        if result.returncode != 0:
            raise RuntimeError(f"`{' '.join(argv)}` failed (exit {result.returncode}):\n{result.stderr}")
        laps = json.loads(result.stdout.strip().splitlines()[-1]) if laps_on_stdout else {}
        return Run({**laps, "wall": wall}, result.stderr)

    def child(self, name: str, *args, cache_dir: Path | None = None, state: str = "peers",
              env: dict | None = None) -> Run:
        """One of the `child_*` functions in a fresh process (adc's, unless `state` is "peers")."""
        return self.fresh([sys.executable, __file__, "child", name, *map(str, args)], cache_dir, state, env,
                          laps_on_stdout=True, adc=state != "peers")

    def folder(self, name: str, runtime_from: Path | None = None, copy_of: Path | None = None) -> Path:
        """A new cache folder: empty; or holding a copy of what `runtime_from` holds of every machine
        (MACHINE_WIDE); or a copy of `copy_of`."""
        self.count += 1
        folder = self.root / f"{self.count:02d}-{name}"
        if copy_of is not None:
            shutil.copytree(copy_of, folder)
        else:
            folder.mkdir()
            if runtime_from is not None:
                for machine_wide in MACHINE_WIDE:
                    if (runtime_from / machine_wide).is_dir():
                        shutil.copytree(runtime_from / machine_wide, folder / machine_wide)
        return folder

    def three_states(self, name: str, run) -> Runs:
        """`run(cache_dir, state)` REPEATS times in each state. The first first-ever folder, once
        run, is the warm folder; the cold folders hold a copy of what it keeps of every machine."""
        first = [self.folder(f"{name}-first-ever") for _ in range(REPEATS)]
        runs = Runs(primed=first[0])
        runs.by_state["first-ever"] = [run(folder, "first-ever") for folder in first]
        runs.by_state["cold"] = [run(self.folder(f"{name}-cold", runtime_from=first[0]), "cold")
                                 for _ in range(REPEATS)]
        runs.by_state["warm"] = [run(first[0], "warm") for _ in range(REPEATS)]
        return runs


def log_problems(state: str, log: str) -> list[str]:
    """Where a run's ADC_LOG=compile lines contradict the state it was meant to be in."""
    runtime_built = "runtime library: cache miss" in log
    misses = [short(line) for line in log.splitlines() if "cache miss" in line]
    if state == "first-ever" and not runtime_built:
        return ["first-ever run did not compile the runtime library"]
    if state.startswith("cold") and runtime_built:
        return [f"{state} run compiled the runtime library"]
    if state.startswith("cold") and not misses:
        return [f"{state} run compiled nothing (every module was cached)"]
    if state == "warm" and misses:
        return [f"warm run compiled: {'; '.join(misses)}"]
    return []


def warm_work(log: str) -> list[str]:
    """The timed stages a warm run still ran (anything but cache hits and linking)."""
    return [short(line) for line in log.splitlines()
            if line.endswith(" ms") and ": link " not in line and "cache hit" not in line]


def short(log_line: str) -> str:
    """A log line without its "adc: " prefix and the repository's path."""
    return log_line.removeprefix("adc: ").replace(f"{REPO}{os.sep}", "")


# ---------------------------------------------------------------- the report

def spread(times: list[float]) -> str:
    """median [min-max] in ms."""
    return (f"{statistics.median(times) * 1e3:9.1f} ms  "
            f"[{min(times) * 1e3:.1f} - {max(times) * 1e3:.1f}]")


def print_row(title: str, runs: Runs, lap: str, target: str, states=STATES, diagnose=STATES) -> None:
    """A row: median [min - max] per state, what the compile logs of the runs in `diagnose` say
    is off, and the target."""
    print(f"\n{title}")
    for state in states:
        print(f"  {state:14s} {spread(runs.times(state, lap))}")
    print_diagnostics(runs, diagnose)
    print(f"  target: {target}")


def print_diagnostics(runs: Runs, states=STATES) -> None:
    problems, notes = [], []
    for state in states:
        for run in runs.by_state.get(state, []):
            problems += log_problems(state, run.log)
            if state == "warm":
                notes += warm_work(run.log)
    for line in dict.fromkeys(problems):
        print(f"  ! {line}")
    if notes:
        stages = {}
        for note in notes:      # "subject: stage 12.3 ms" -> median time per stage
            subject_stage, ms = note.rsplit(" ", 2)[0], float(note.rsplit(" ", 2)[1])
            stages.setdefault(subject_stage, []).append(ms)
        text = ", ".join(f"{s} {statistics.median(t):.0f} ms" for s, t in stages.items())
        print(f"  note: warm runs still run {text}")


def machine_line() -> str:
    from importlib import metadata
    from importlib.util import find_spec

    from machine import cpu_model

    model = cpu_model()
    versions = []
    for package in ("adc", "llvmlite", "numpy", "jax", "jaxlib", "torch", "tensorflow"):
        try:
            version = metadata.version(package) if find_spec(package) else None
        except metadata.PackageNotFoundError:
            version = None
        versions.append(f"{package} {version or 'not installed'}")
    import llvmlite.binding

    llvm = ".".join(map(str, llvmlite.binding.llvm_version_info))
    return (f"machine: {model}, {os.cpu_count()} cores (load average {load_average()}); "
            f"python {sys.version.split()[0]}; {', '.join(versions)}; LLVM {llvm}")


def load_average() -> str:
    """The 1-minute load average: other work on the machine shows in compile times."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "unknown"


def adc_fingerprint() -> str:
    """What the compile cache keys depend on: adc's sources and versions (recomputed, not the cached value)."""
    from adc.driver.cache_keys import fingerprint

    return fingerprint.__wrapped__()


def installed(module: str) -> bool:
    from importlib.util import find_spec

    return find_spec(module) is not None


def bench_compile() -> None:
    began = time.perf_counter()
    print(f"\ncompile latency: each figure is one first call in a fresh process, run {REPEATS}x: median "
          f"[min - max]\n  {machine_line()}\n  (adc's processes read adc's .pyc files from a bytecode cache filled "
          f"before measuring, as an installed adc would)")
    fingerprint = adc_fingerprint()
    with tempfile.TemporaryDirectory(prefix="adc-compile-bench-") as tmp:
        session = Session(Path(tmp))

        # Rows 1-3: compile_file, then the first gradient at each batch size.
        kernels = session.three_states("kernels", lambda d, state: session.child("kernels", *BATCHES,
                                                                                 cache_dir=d, state=state))
        primed = session.folder("gradient-cold-template", runtime_from=kernels.primed)  # row 2's cold state:
        session.child("kernels", cache_dir=primed, state="priming")                     # + the kernels module
        kernels.by_state["cold + kernels"] = [
            session.child("kernels", BATCHES[0], cache_dir=session.folder("gradient-cold", copy_of=primed),
                          state="cold + kernels")
            for _ in range(REPEATS)]
        peers = {}
        if installed("jax"):
            peers["jax jit(grad)"] = [session.child("jax", *BATCHES, env={"JAX_PLATFORMS": "cpu"})
                                      for _ in range(REPEATS)]
        if installed("torch"):
            peers["torch eager"] = [session.child("torch", *BATCHES) for _ in range(REPEATS)]
        if installed("tensorflow"):
            quiet = {"TF_CPP_MIN_LOG_LEVEL": "2"}
            peers["tf eager"] = [session.child("tensorflow", "eager", *BATCHES, env=quiet) for _ in range(REPEATS)]
            peers["tf.function"] = [session.child("tensorflow", "function", *BATCHES, env=quiet)
                                    for _ in range(REPEATS)]

        # Row 4: the `adc compile` command.
        out = session.root / "kernels.so"
        command = [sys.executable, "-m", "adc", "compile", str(KERNELS.relative_to(REPO)), "-o", str(out)]
        aot = session.three_states("adc-compile", lambda d, state: session.fresh(command, d, state))

        # Row 5: a second-order gradient from row 4's .so, in a process with another cache folder.
        second = session.three_states("second-order", lambda d, state: session.child("second_order", out,
                                                                                     cache_dir=d, state=state))
        compiled_bytecode = sorted(session.bytecode_files() - session.preloaded)

    print_row(f"0. first-ever: empty cache, end of `import adc` to the first mlp_loss gradient's return "
              f"(B={BATCHES[0]}; runtime library, kernels module and both VJP halves built)",
              kernels, "after import", "<= 1 s", states=("first-ever",), diagnose=("first-ever",))
    print_row('1. adc.compile_file("samples/kernels.adc"), timed after `import adc`', kernels, "compile",
              "cold kernels.adc <= 0.6 s, warm <= 50 ms")
    print_row(f"2. first mlp_loss gradient, B={BATCHES[0]}, 784->512->10 f32: record + tape.gradient "
              "(cold: the kernels module cached, its VJP not)",
              kernels, f"B={BATCHES[0]}", "cold mlp_loss gradient <= 0.4 s, warm <= 50 ms",
              states=("first-ever", "cold + kernels", "warm"), diagnose=("cold + kernels",))
    print_shapes_row(kernels, peers)
    print_row(f"4. `python -m adc compile {KERNELS.relative_to(REPO)} -o OUT.so`, whole command (wall)",
              aot, "wall", "cold <= 1.5 s")
    print_row("5. first second-order gradient from a .so: d/dx sum(d sigmoid_shift(x, 0.5)/dx), x f32[1000], "
              "nested tapes\n   (adc.load of a .so built with another cache folder; the VJP of its embedded "
              "VJP is compiled from its IR)", second, "second-order", "none set")
    if compiled_bytecode:
        names = ", ".join(f"{path.parent.name}/{path.name.split('.')[0]}" for path in compiled_bytecode)
        print(f"\n  ! {len(compiled_bytecode)} Python modules were compiled to bytecode during the measured runs, "
              f"by the first process importing them (add them to Session.PRELOAD): {names}")
    if adc_fingerprint() != fingerprint:
        print("\n  ! adc's sources changed during the benchmark (the compile cache's fingerprint differs), "
              "so cached entries stopped matching: rerun it")
    kinds = ", ".join(f"{state} {seconds:.0f} s" for state, seconds in session.spent.items())
    print(f"\n  (compile benchmark: {time.perf_counter() - began:.0f} s, load average now {load_average()}; "
          f"fresh processes by state: {kinds})")


def print_shapes_row(kernels: Runs, peers: dict[str, list[Run]]) -> None:
    sizes = ", ".join(map(str, BATCHES))
    print(f"\n3. cold start across shapes: Σ of the first mlp_loss gradients at B = {sizes}, kernel compile "
          f"included\n   (adc: clock started before compile_file; peers: after import and parameter creation)")
    for state in STATES:     # the processes of row 1: its diagnostics are printed there
        print(f"  adc {state:10s} {spread(kernels.times(state, 'total'))}")
    cold = statistics.median(kernels.times("cold", "total"))
    for name, runs in peers.items():
        t = [run.laps["total"] for run in runs]
        print(f"  {name:14s} {spread(t)}   {name}/adc cold = {statistics.median(t) / cold:5.2f}x")
    for name, module in (("jax", "jax"), ("torch", "torch"), ("tensorflow", "tensorflow")):
        if not installed(module):
            print(f"  {name:14s} not installed")
    per_call = {"adc cold": kernels.by_state["cold"], **peers}
    print("  first calls (median ms):")
    for name, runs in per_call.items():
        laps = [lap for lap in runs[0].laps if lap == "compile" or lap.startswith("B=")]
        text = "  ".join(f"{lap} {statistics.median(run.laps[lap] for run in runs) * 1e3:.1f}" for lap in laps)
        imports = statistics.median(run.laps["import"] for run in runs) * 1e3
        print(f"    {name:14s} {text}   (import, not timed: {imports:.0f})")
    print("  target: cold adc <= 0.5x JAX")


def main(argv: list[str]) -> int:
    if argv[:1] == ["child"]:
        print(json.dumps(CHILDREN[argv[1]](*argv[2:])))
        return 0
    bench_compile()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
