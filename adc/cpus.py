"""What CPU a shared object needs, and what this CPU has.

`adc compile --cpu NAME` records in the `.so` the instruction-set extensions its
code was built for, and `adc.load` refuses a file naming one this CPU lacks,
before mapping any code. Features carry LLVM's names without the `+` (`avx2`,
`sse4.2`, `avx512f`). Standard library only: a deployment that just loads `.so`
files has no llvmlite, so the host is read from the kernel's /proc/cpuinfo.

    LEVELS["x86-64-v3"]                          # ('avx', 'avx2', 'bmi', ..., 'xsave')
    missing_features(("avx2", "fma", "avx512f"))  # on a Haswell: ('avx512f',)
"""
from __future__ import annotations

import functools
from typing import Iterable


def _cumulative(*steps: tuple[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Each level has every feature of the levels below it."""
    levels, features = {}, ()
    for name, added in steps:
        features = tuple(sorted(features + added))
        levels[name] = features
    return levels


# The x86-64 psABI micro-architecture levels. The baseline's OSFXSR and SCE are
# operating-system state LLVM has no feature for; LLVM's own CPUs of these names
# also enable `crc32` (part of SSE4.2) and `64bit`, which no loader need check.
LEVELS: dict[str, tuple[str, ...]] = _cumulative(
    ("x86-64", ("cmov", "cx8", "fxsr", "mmx", "sse", "sse2", "x87")),
    ("x86-64-v2", ("cx16", "popcnt", "sahf", "sse3", "sse4.1", "sse4.2", "ssse3")),
    ("x86-64-v3", ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave")),
    ("x86-64-v4", ("avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl")),
)

# The features a loader checks: the levels' and the other extensions compiled code
# may compute with (SIMD, bit manipulation, crypto). Not tuning flags, and not
# system, security, cache-control, random-number or transactional instructions,
# which LLVM emits only for intrinsics adc never calls: a virtual machine hiding
# one of those must not make a `.so` unloadable.
CHECKABLE: frozenset[str] = frozenset(LEVELS["x86-64-v4"]) | {
    "adx", "aes", "avx512bf16", "avx512bitalg", "avx512fp16", "avx512ifma", "avx512vbmi",
    "avx512vbmi2", "avx512vnni", "avx512vp2intersect", "avx512vpopcntdq", "avxifma", "avxvnni",
    "fma4", "gfni", "pclmul", "prfchw", "sha", "sse4a", "tbm", "vaes", "vpclmulqdq", "xop",
}

# LLVM's name -> Linux's /proc/cpuinfo flag, where they differ (the kernel's
# arch/x86/include/asm/cpufeatures.h); every other checkable feature has one name.
CPUINFO_NAMES: dict[str, str] = {
    "x87": "fpu",
    "sse3": "pni",
    "sse4.1": "sse4_1",
    "sse4.2": "sse4_2",
    "sahf": "lahf_lm",              # LAHF/SAHF in 64-bit mode
    "lzcnt": "abm",                 # CPUID 0x80000001 ECX[5], LZCNT on Intel and AMD
    "bmi": "bmi1",
    "pclmul": "pclmulqdq",
    "sha": "sha_ni",
    "prfchw": "3dnowprefetch",      # CPUID 0x80000001 ECX[8], PREFETCHW
    "avx512bf16": "avx512_bf16",
    "avx512bitalg": "avx512_bitalg",
    "avx512fp16": "avx512_fp16",
    "avx512vbmi2": "avx512_vbmi2",
    "avx512vnni": "avx512_vnni",
    "avx512vp2intersect": "avx512_vp2intersect",
    "avx512vpopcntdq": "avx512_vpopcntdq",
    "avxifma": "avx_ifma",
    "avxvnni": "avx_vnni",
}


def checkable(features: Iterable[str]) -> tuple[str, ...]:
    """The features a loader can look for on a host, sorted: all a `.so` records."""
    return tuple(sorted(set(features) & CHECKABLE))


def _parse_cpuinfo(text: str) -> frozenset[str]:
    """The checkable features of a /proc/cpuinfo text, in LLVM's names.

    Only those every processor lists (a hybrid CPU's cores may differ); raises
    OSError if there is no `flags` line, as on other architectures."""
    flag_sets = [set(line.partition(":")[2].split()) for line in text.splitlines()
                 if line.split(":", 1)[0].strip() == "flags"]
    if not flag_sets:
        raise OSError("/proc/cpuinfo has no 'flags' line: CPU features are known only on x86-64 Linux")
    flags = set.intersection(*flag_sets)
    return frozenset(f for f in CHECKABLE if CPUINFO_NAMES.get(f, f) in flags)


@functools.lru_cache(maxsize=1)
def host_features() -> frozenset[str]:
    """This CPU's checkable features, as the kernel reports them (so also what the OS enables).

    Raises OSError where that is unknown (not x86-64 Linux) rather than answer an
    empty set, which would make every requirement look missing."""
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
        return _parse_cpuinfo(file.read())


def missing_features(required: Iterable[str], available: Iterable[str] | None = None) -> tuple[str, ...]:
    """The checkable features of `required` not in `available` (default: this CPU's), sorted."""
    have = host_features() if available is None else frozenset(available)
    return tuple(f for f in checkable(required) if f not in have)
