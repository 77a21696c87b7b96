"""Target.for_cpu: x86-64 levels and LLVM's CPU names, their features, vector widths and code."""
import re

import llvmlite.binding as llvm
import pytest

from adc import cpus
from adc.codegen.toolchain.target import Target, _cpu_features

LEVEL_BITS = {"x86-64": 128, "x86-64-v2": 128, "x86-64-v3": 256, "x86-64-v4": 512}

# name: (level it contains, features it has beyond that level, features it lacks, vector bits)
NAMED = {
    "haswell": ("x86-64-v3", {"pclmul"}, {"avx512f", "adx", "sha"}, 256),
    "skylake-avx512": ("x86-64-v4", {"adx", "aes", "prfchw"}, {"avx512vbmi", "avx512ifma", "sha"}, 512),
    "icelake-server": ("x86-64-v4", {"avx512vbmi2", "gfni", "sha", "vaes"}, {"avx512bf16", "avx512fp16"}, 512),
    "znver3": ("x86-64-v3", {"sha", "sse4a", "vaes", "vpclmulqdq"}, {"avx512f", "gfni"}, 256),
    "znver4": ("x86-64-v4", {"avx512bf16", "avx512vbmi2", "gfni"}, {"avx512fp16", "avx512vp2intersect"}, 512),
}

# y[i] = 3 * x[i]: the loop vectorizer widens it to the target's preferred vectors.
SCALE_LOOP = """
define void @scale(ptr noalias %x, ptr noalias %y, i64 %n) {
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %body
body:
  %i = phi i64 [ 0, %entry ], [ %next, %body ]
  %px = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %px
  %w = fmul float %v, 3.0
  %py = getelementptr inbounds float, ptr %y, i64 %i
  store float %w, ptr %py
  %next = add nuw nsw i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %body, label %done
done:
  ret void
}
"""

# 16 floats at once, as lowering's matrix tiles are when vector_bits is 512 (rules/matmul.py).
SCALE_16 = """
define void @scale16(ptr %x) {
  %v = load <16 x float>, ptr %x
  %w = fmul <16 x float> %v, splat (float 3.0)
  store <16 x float> %w, ptr %x
  ret void
}
"""


def registers(target: Target, text: str) -> set[str]:
    """The kinds of vector register (xmm, ymm, zmm) in `text` compiled for `target`."""
    module = llvm.parse_assembly(text)
    target.optimize(module)
    return set(re.findall(r"%([xyz]mm)\d+", target.target_machine().emit_assembly(module)))


def test_native_is_the_host():
    assert Target.for_cpu() == Target.host()
    assert Target.for_cpu("native", pic=True) == Target.host(pic=True)


@pytest.mark.parametrize("level", cpus.LEVELS)
def test_a_level_enables_its_features_and_disables_the_higher_ones(level):
    target = Target.for_cpu(level, pic=True)
    assert (target.cpu, target.pic) == (level, True)
    assert target.required_features == cpus.LEVELS[level]
    assert target.vector_bits == LEVEL_BITS[level]
    features = target.features.split(",")
    for feature in cpus.LEVELS["x86-64-v4"]:
        assert (f"+{feature}" if feature in cpus.LEVELS[level] else f"-{feature}") in features


@pytest.mark.parametrize("level", ["x86-64-v2", "x86-64-v3", "x86-64-v4"])
def test_llvm_cpu_of_a_level_name_has_the_psabi_features(level):
    """The probe of LLVM's own CPU named like the level agrees with the psABI, but for `sahf`,
    which the probe never reports (LLVM emits no LAHF/SAHF in 64-bit code)."""
    learned = Target(llvm.get_process_triple(), level, _cpu_features(llvm.get_process_triple(), level))
    assert set(learned.required_features) == set(cpus.LEVELS[level]) - {"sahf"}


@pytest.mark.parametrize("name", NAMED)
def test_an_llvm_cpu_name_gets_the_features_llvm_enables_for_it(name):
    level, extra, lacking, bits = NAMED[name]
    target = Target.for_cpu(name)
    required = set(target.required_features)
    assert target.cpu == name
    assert set(cpus.LEVELS[level]) - {"sahf"} <= required
    assert extra <= required
    assert not lacking & required
    assert target.vector_bits == bits
    assert ("+avx512f" in target.features.split(",")) == (bits == 512)


def test_cx16_which_the_inliner_cannot_see_is_found_by_code_generation():
    assert "cx16" not in Target.for_cpu("k8").required_features      # the first Opterons
    assert "cx16" in Target.for_cpu("k8-sse3").required_features


def test_a_32_bit_cpu_name_still_builds_x86_64_code():
    target = Target.for_cpu("i686")
    assert target.vector_bits == 128
    assert "xmm" in registers(target, SCALE_LOOP)


def test_keys_differ_between_cpus():
    names = ["native", *cpus.LEVELS, *NAMED]
    assert len({Target.for_cpu(name).key() for name in names}) == len(names)
    assert Target.for_cpu("znver3").key() != Target.for_cpu("znver3", pic=True).key()


def test_an_unknown_cpu_is_an_error_and_llvm_warning_stays_quiet(capfd):
    with pytest.raises(ValueError) as error:
        Target.for_cpu("pentium9000")
    message = str(error.value)
    assert "'pentium9000'" in message and "x86-64-v3" in message and "-mcpu=help" in message
    assert "not a recognized processor" not in capfd.readouterr().err


def test_x86_64_v2_code_has_no_avx_registers():
    assert registers(Target.for_cpu("x86-64-v2"), SCALE_LOOP) == {"xmm"}
    assert not registers(Target.for_cpu("x86-64-v2"), SCALE_16) & {"ymm", "zmm"}


def test_x86_64_v3_code_uses_ymm_but_never_zmm():
    assert "ymm" in registers(Target.for_cpu("x86-64-v3"), SCALE_LOOP)
    assert "zmm" not in registers(Target.for_cpu("x86-64-v3"), SCALE_16)


def test_x86_64_v4_code_uses_zmm_for_512_bit_vectors():
    """LLVM's x86-64-v4 prefers 256-bit vectors when it vectorizes loops itself (like
    skylake-avx512), but 512-bit vectors, which vector_bits asks lowering for, use zmm."""
    assert "zmm" in registers(Target.for_cpu("x86-64-v4"), SCALE_16)


def test_adc_cpu_sets_the_jit_target(monkeypatch):
    from adc import driver

    monkeypatch.setenv("ADC_CPU", "x86-64-v3")
    target = driver.host_target()
    assert (target.cpu, target.pic, target.vector_bits) == ("x86-64-v3", True, 256)
    monkeypatch.setenv("ADC_CPU", "native")
    assert driver.host_target() == Target.host(pic=True)


def test_an_unknown_adc_cpu_is_an_error_naming_the_variable(monkeypatch):
    from adc import driver

    monkeypatch.setenv("ADC_CPU", "pentium-9000")
    with pytest.raises(ValueError, match="ADC_CPU=pentium-9000"):
        driver.host_target()



def test_a_block_reached_only_by_a_jump_starts_a_64_byte_line():
    """BLOCK_ALIGNMENT_OPTION: a block no other falls into (here the vector loop's preheader, after
    the short-trip jump) starts a 64-byte line, so the loop after it sits where its own code puts
    it, whatever code comes before; LLVM's x86 default aligns it to 16 bytes at most."""
    module = llvm.parse_assembly(SCALE_LOOP)
    target = Target.for_cpu("x86-64-v3")
    target.optimize(module)
    jumped_to, alignment, falls_through = [], 0, True
    for line in target.target_machine().emit_assembly(module).splitlines():
        text = line.strip()
        if text.startswith(".p2align"):
            alignment = max(alignment, int(text.split()[1].rstrip(",")))
        elif re.fullmatch(r"\.LBB\d+_\d+:", text):
            if not falls_through:
                jumped_to.append((text, alignment))
            alignment = 0
        elif text and not text.startswith((".", "#")):
            falls_through = not re.match(r"(jmp|ret)", text)
    assert jumped_to and all(log2 == 6 for _, log2 in jumped_to), jumped_to
