"""The compilation target: triple, CPU, features and optimization level, in one value.

Everything that depends on the machine code we produce reads it from a
`Target`, never from globals: the JIT and the shared-object path differ only
in `pic`, and `key()` goes into cache keys next to the source hash.
`optimize` runs LLVM's new pass manager at `opt_level` with the loop and SLP
vectorizers on, verifying the module before and after.

`Target.for_cpu` builds for another CPU (`adc compile --cpu`): an x86-64 level
or one of LLVM's CPU names, whose features are learned from LLVM itself.

    target = Target.host()              # x86_64-unknown-linux-gnu, znver5, +avx512f,...
    target.optimize(llvm_module_ref)    # in place; raises on an invalid module
    Target.for_cpu("haswell").required_features     # ('avx', 'avx2', 'bmi', ..., 'xsave')

A `Target` is a plain value: LLVM (llvmlite.binding, ~35 ms to import) is loaded
by the first method that asks it something, so a process whose code is all cached
can name its target (the driver remembers the host's) without loading LLVM.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, TypeVar

from adc.cpus import LEVELS, checkable

if TYPE_CHECKING:
    import llvmlite.binding

T = TypeVar("T")


# A block reached only by a jump (a loop's preheader after its short-trip test, an exit) starts a
# 64-byte line, where LLVM's x86 default is 16 bytes: where the loops after it sit in their lines
# then follows from their own code, not from whatever code comes before. Without it a change to a
# kernel's entry block moved every loop of the softmax cross-entropy's gradient 32 bytes, the
# same instructions, and on AMD Zen 4 it ran 25% slower (1.22 ms against 0.95); with it, 0.90,
# and no row of benchmarks/run.py is slower. The padding adds ~2.5% to the code. (A log2 value.
# LLVM's options are process-wide and llvmlite has no per-machine one, so another llvmlite user
# in this process, such as Numba, gets it too: placement, never meaning.)
BLOCK_ALIGNMENT_OPTION = "-align-all-nofallthru-blocks=6"


@functools.cache
def _llvm():
    """llvmlite.binding, imported, its native target initialized and adc's code placement set,
    on first use."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.set_option("adc", BLOCK_ALIGNMENT_OPTION)
    return llvm


@dataclass(frozen=True)
class Target:
    """What machine code is produced for; equal targets produce identical code."""

    triple: str
    cpu: str
    features: str
    opt_level: int = 3
    pic: bool = False
    # A bounds-checked build (codegen/lowering/bounds.py): every access checked against its buffer's extent,
    # every heap block redzoned. `misindex` is a test hook of checked builds only: stores into
    # buffers of that kind (bounds.MISINDEX_KINDS) go one element further, as a sizing bug's would.
    check_bounds: bool = False
    misindex: str = ""
    # A test hook: every matrix factored and solved by the runtime library's blocked routines, in
    # blocks of this order (0: the measured choice, lowering/rules/matrices.py's BLOCKED_ORDER and BLOCK),
    # so that small matrices exercise the recursion
    linalg_block: int = 0
    # First-tier code (`first_tier`): the same optimized IR, its instructions selected by LLVM's
    # fast path (code generation at level 0): 8-13 ms instead of 30-57 for mlp_loss's split VJP halves
    quick: bool = False

    @staticmethod
    @functools.cache
    def host(pic: bool = False) -> "Target":
        """The machine this process runs on (`pic` for code linked into a shared object); asked of
        LLVM once per process, as every compile and cache lookup needs it."""
        llvm = _llvm()
        return Target(llvm.get_process_triple(), llvm.get_host_cpu_name(),
                      llvm.get_host_cpu_features().flatten(), pic=pic)

    @staticmethod
    def for_cpu(name: str = "native", pic: bool = False) -> "Target":
        """Code for CPU `name`: "native" (this machine), an x86-64 level (`LEVELS`) or an
        LLVM CPU name such as "znver3"; raises ValueError for a name LLVM does not know."""
        if name == "native":
            return Target.host(pic)
        llvm = _llvm()
        triple = llvm.get_process_triple()
        if not triple.startswith("x86_64"):
            raise ValueError(f"CPU {name!r}: only 'native' is supported on {triple}, CPU names are x86-64's")
        features = _level_features(name) if name in LEVELS else _cpu_features(triple, name)
        return Target(triple, name, features, pic=pic)

    @property
    def required_features(self) -> tuple[str, ...]:
        """The features a loader can check that this target's code may use: what its `.so` records."""
        return checkable(f[1:] for f in self.features.split(",") if f.startswith("+"))

    @property
    def vector_bits(self) -> int:
        """The widest SIMD registers the features allow: 512 (AVX-512), 256 (AVX), else 128."""
        features = set(self.features.split(","))
        return 512 if "+avx512f" in features else 256 if "+avx" in features else 128

    def key(self) -> str:
        """A stable text naming this target, for cache keys."""
        reloc = "pic" if self.pic else "static"
        checks = f"|bounds{':' + self.misindex if self.misindex else ''}" if self.check_bounds else ""
        block = f"|block{self.linalg_block}" if self.linalg_block else ""
        tier = "|quick" if self.quick else ""
        return f"{self.triple}|{self.cpu}|{self.features}|O{self.opt_level}|{reloc}{checks}{block}{tier}"

    @property
    def unchecked(self) -> "Target":
        """This target without bounds checks and test hooks: what the runtime library, which holds no
        checks and takes its block sizes as arguments, is built for."""
        return dataclasses.replace(self, check_bounds=False, misindex="", linalg_block=0, quick=False)

    @property
    def first_tier(self) -> "Target":
        """Code that serves while this target's is compiled: the IR optimized alike, so it computes
        the same bits (adc's only fast-math flag, reductions' `reassoc`, is the vectorizer's to use
        before code generation, and adc fuses multiply-adds only as `llvm.fma`), but its
        instructions selected and registers allocated by LLVM's fast path, slower to run."""
        return dataclasses.replace(self, quick=True)

    @property
    def full_tier(self) -> "Target":
        """This target's full code: what its IR is optimized for, first tier or not."""
        return dataclasses.replace(self, quick=False)

    def target_machine(self) -> llvmlite.binding.TargetMachine:
        """The shared (cached) target machine; never hand it to an owner such as an execution engine."""
        return _target_machine(self)

    def new_target_machine(self) -> llvmlite.binding.TargetMachine:
        """A target machine of one's own: a JIT takes ownership of (and frees) its machine."""
        return _llvm().Target.from_triple(self.triple).create_target_machine(
            cpu=self.cpu, features=self.features, opt=0 if self.quick else min(self.opt_level, 3),
            reloc="pic" if self.pic else "default", codemodel="default" if self.pic else "jitdefault",
            jit=not self.pic)

    def prepare(self, module: llvmlite.binding.ModuleRef) -> None:
        """Stamp `module` with this target's triple and data layout."""
        module.triple = self.triple
        module.data_layout = _data_layout(self)

    def optimize(self, module: llvmlite.binding.ModuleRef, unroll: bool = False) -> None:
        """Run the O`opt_level` pipeline with both vectorizers, verifying before and after, with
        LLVM's MergeFunctions before and after it. Lowering outlines a function per op, and a
        derivative's ops repeat: the second-order gradient through a loop holding an if has 917
        functions, 437 of them distinct. Before the pipeline, MergeFunctions folds those LLVM never
        inlines (noinline nests, tasks) and those it always inlines, so each is optimized once
        (that kernel: 4.3 -> 3.1 s); a function LLVM may inline carries an attribute of its own
        (emit.prepared_for_merging), so it keeps its only caller. After the pipeline it folds
        functions optimized to the same code, which is then generated once (3.6 -> 2.4 s).

        `unroll` lets LLVM unroll and interleave loops. adc's own loop nests of symbolic sizes
        are vectorized but not unrolled: unrolling and interleaving them doubled their
        optimization and code generation time (mlp_loss VJP: 252 -> 128 ms of CPU) and changed no
        measured speed beyond noise (sigmoid_shift, mlp_loss forward and gradient, sums of 64K
        and 4M elements: within 3%). The runtime library's blocked gemm is compiled with it, and
        so is a kernel of fixed sizes, whose short loops of constant trip count it unrolls
        (compiler.lowered_kernel).
        """
        module.verify()
        self.prepare(module)
        llvm = _llvm()
        tuning = llvm.create_pipeline_tuning_options(speed_level=self.opt_level)
        tuning.loop_vectorization = True
        tuning.slp_vectorization = True
        tuning.loop_unrolling = tuning.loop_interleaving = unroll
        builder = llvm.create_pass_builder(self.full_tier.target_machine(), tuning)    # a first tier's IR is the same
        merging = llvm.create_new_module_pass_manager()
        merging.add_merge_functions_pass()
        merging.run(module, builder)
        builder.getModulePassManager().run(module, builder)
        merging.run(module, builder)
        module.verify()


@functools.lru_cache(maxsize=None)
def _target_machine(target: Target) -> llvmlite.binding.TargetMachine:
    """One target machine per distinct target: creating one costs milliseconds."""
    return target.new_target_machine()


@functools.lru_cache(maxsize=None)
def _data_layout(target: Target) -> str:
    """Read once: the target machine owns its TargetData, which must not be re-wrapped per module."""
    return str(target.target_machine().target_data)


def _level_features(level: str) -> str:
    """The level's features on and, explicitly off, those of the levels above it (which no
    feature of a lower level implies), so `vector_bits` reads the level right."""
    on = set(LEVELS[level])
    return ",".join(("+" if f in on else "-") + f for f in LEVELS["x86-64-v4"])


# Features X86TTIImpl::areInlineCompatible ignores (its InlineFeatureIgnoreList), so the
# inlining probe cannot see them: `cx16` is probed by code generation instead, `64bit` is
# forced on (LLVM aborts on a 32-bit CPU name otherwise), and `sahf` is left to the CPU's
# default and never recorded, as LLVM emits no LAHF/SAHF in 64-bit code.
_INLINER_BLIND = frozenset({"64bit", "cx16", "nopl", "sahf"})


@functools.lru_cache(maxsize=None)
def _cpu_features(triple: str, cpu: str) -> str:
    """LLVM's features for CPU `cpu` as an explicit +/- list over every feature LLVM can detect
    on a host and every level's: llvmlite exposes no CPU's feature table, so LLVM is asked
    through its inliner and code generator (about 0.1 s, once per CPU and process)."""
    llvm = _llvm()
    machine, warnings = _with_stderr(lambda: llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features="+64bit"))
    if cpu in ("", "help") or "not a recognized processor" in warnings:
        raise ValueError(f"unknown CPU {cpu!r}: use 'native', an x86-64 level ({', '.join(LEVELS)}) "
                         f"or an LLVM CPU name (`llc -march=x86-64 -mcpu=help` lists them)")
    sys.stderr.write(warnings)
    candidates = sorted((set(llvm.get_host_cpu_features()) | set(LEVELS["x86-64-v4"])) - _INLINER_BLIND)
    enabled = _inlinable_features(machine, cpu, candidates) | ({"cx16"} if _has_cx16(machine) else set())
    return ",".join(["+64bit"] + [("+" if f in enabled else "-") + f for f in sorted(candidates + ["cx16"])])


# One caller-callee pair per candidate feature. The callee is not `alwaysinline`: LLVM's
# always-inliner skips the feature check. The volatile store keeps the call from being folded
# away rather than inlined.
_INLINING_PAIR = """
define internal void @callee{k}() #{k} {{
  store volatile i32 {k}, ptr @sink
  ret void
}}
define void @caller{k}() #0 {{
  call void @callee{k}()
  ret void
}}
attributes #{k} = {{ "target-cpu"="{cpu}" "target-features"="+64bit,+{feature}" }}
"""


def _inlinable_features(machine: llvmlite.binding.TargetMachine, cpu: str, candidates: list[str]) -> set[str]:
    """The candidates `cpu` has: LLVM inlines a callee only if its features are a subset of the
    caller's, so with the caller built for `cpu` and the callee for `cpu` plus feature F, the
    callee is gone after optimization exactly when `cpu` has F."""
    text = "".join(_INLINING_PAIR.format(k=k, cpu=cpu, feature=feature)
                   for k, feature in enumerate(candidates, start=1))
    llvm = _llvm()
    module = llvm.parse_assembly(f'@sink = global i32 0\n{text}\n'
                                 f'attributes #0 = {{ "target-cpu"="{cpu}" "target-features"="+64bit" }}\n')
    module.triple = machine.triple
    builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=1))
    builder.getModulePassManager().run(module, builder)
    left = {function.name for function in module.functions}
    return {feature for k, feature in enumerate(candidates, start=1) if f"callee{k}" not in left}


_COMPARE_AND_SWAP_16 = """
define i128 @swap(ptr %p, i128 %old, i128 %new) {
  %pair = cmpxchg ptr %p, i128 %old, i128 %new seq_cst seq_cst
  %value = extractvalue { i128, i1 } %pair, 0
  ret i128 %value
}
"""


def _has_cx16(machine: llvmlite.binding.TargetMachine) -> bool:
    """A 16-byte compare-and-swap compiles to CMPXCHG16B only with cx16, else to a library call."""
    module = _llvm().parse_assembly(_COMPARE_AND_SWAP_16)
    module.triple = machine.triple
    return "cmpxchg16b" in machine.emit_assembly(module)


def _with_stderr(action: Callable[[], T]) -> tuple[T, str]:
    """`action()` and what it wrote to file descriptor 2, where LLVM prints its warnings
    (so they never reach the terminal); the whole process's stderr is redirected meanwhile."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                result = action()
            finally:
                os.dup2(saved, 2)
            sink.seek(0)
            return result, sink.read().decode(errors="replace")
    finally:
        os.close(saved)
