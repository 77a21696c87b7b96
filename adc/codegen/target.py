"""The compilation target: triple, CPU, features and optimization level, in one value.

Everything that depends on the machine code we produce reads it from a
`Target`, never from globals: the JIT and the shared-object path differ only
in `pic`, and `key()` goes into cache keys next to the source hash.
`optimize` runs LLVM's new pass manager at `opt_level` with the loop and SLP
vectorizers on, verifying the module before and after.

    target = Target.host()              # x86_64-unknown-linux-gnu, znver5, +avx512f,...
    target.optimize(llvm_module_ref)    # in place; raises on an invalid module
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import llvmlite.binding as llvm


def _initialize() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@dataclass(frozen=True)
class Target:
    """What machine code is produced for; equal targets produce identical code."""

    triple: str
    cpu: str
    features: str
    opt_level: int = 3
    pic: bool = False

    @staticmethod
    def host(pic: bool = False) -> "Target":
        """The machine this process runs on (`pic` for code linked into a shared object)."""
        _initialize()
        return Target(llvm.get_process_triple(), llvm.get_host_cpu_name(),
                      llvm.get_host_cpu_features().flatten(), pic=pic)

    @property
    def vector_bits(self) -> int:
        """The widest SIMD registers the features allow: 512 (AVX-512), 256 (AVX), else 128."""
        features = set(self.features.split(","))
        return 512 if "+avx512f" in features else 256 if "+avx" in features else 128

    def key(self) -> str:
        """A stable text naming this target, for cache keys."""
        reloc = "pic" if self.pic else "static"
        return f"{self.triple}|{self.cpu}|{self.features}|O{self.opt_level}|{reloc}"

    def target_machine(self) -> llvm.TargetMachine:
        """The shared (cached) target machine; never hand it to an owner such as an execution engine."""
        return _target_machine(self)

    def new_target_machine(self) -> llvm.TargetMachine:
        """A target machine of one's own: an MCJIT engine takes ownership of (and frees) its machine."""
        _initialize()
        return llvm.Target.from_triple(self.triple).create_target_machine(
            cpu=self.cpu, features=self.features, opt=min(self.opt_level, 3),
            reloc="pic" if self.pic else "default", codemodel="default" if self.pic else "jitdefault",
            jit=not self.pic)

    def prepare(self, module: llvm.ModuleRef) -> None:
        """Stamp `module` with this target's triple and data layout."""
        module.triple = self.triple
        module.data_layout = _data_layout(self)

    def optimize(self, module: llvm.ModuleRef) -> None:
        """Run the O`opt_level` pipeline with both vectorizers, verifying before and after."""
        module.verify()
        self.prepare(module)
        tuning = llvm.create_pipeline_tuning_options(speed_level=self.opt_level)
        tuning.loop_vectorization = True
        tuning.slp_vectorization = True
        builder = llvm.create_pass_builder(self.target_machine(), tuning)
        builder.getModulePassManager().run(module, builder)
        module.verify()


@functools.lru_cache(maxsize=None)
def _target_machine(target: Target) -> llvm.TargetMachine:
    """One target machine per distinct target: creating one costs milliseconds."""
    return target.new_target_machine()


@functools.lru_cache(maxsize=None)
def _data_layout(target: Target) -> str:
    """Read once: the target machine owns its TargetData, which must not be re-wrapped per module."""
    return str(target.target_machine().target_data)
